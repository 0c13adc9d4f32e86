/* test_domxml.c - a service VM's domain XML (backends/vm/domxml.c): every
 * value the operator or a job's name puts in comes back from a parser as
 * it went in, and can add no element or attribute of its own; the pieces
 * libvirt needs are where it looks for them. */
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backends/vm/domxml.h"
#include "tap.h"

static xmlDocPtr doc;

/* The string value of an XPath expression in doc ("" when none). */
static const char *xp(const char *expr)
{
	static char out[4][1024];
	static int k;
	xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
	xmlXPathObjectPtr obj = ctx ? xmlXPathEvalExpression((const xmlChar *)expr, ctx) : NULL;
	xmlChar *v = obj ? xmlXPathCastToString(obj) : NULL;
	char *o = out[k++ % 4];

	snprintf(o, 1024, "%s", v ? (const char *)v : "");
	xmlFree(v);
	xmlXPathFreeObject(obj);
	xmlXPathFreeContext(ctx);
	return o;
}

static bool load(const char *xml)
{
	if (doc)
		xmlFreeDoc(doc);
	doc = xml ? xmlReadMemory(xml, (int)strlen(xml), "d.xml", NULL, XML_PARSE_NONET) : NULL;
	return doc != NULL;
}

int main(void)
{
	static const char evil_net[] = "net' onload='x\"><evil/>",
			  evil_console[] = "/var/log/a'<b>&c.al-svc-j1",
			  cmdline[] = "console=ttyS0 quiet a=1&b=<2>";
	const uint16_t ports[] = {8080, 9000};
	struct al_vm_domain d = {
	    .type = "qemu",
	    .name = "al-svc-j1",
	    .memory_mib = 384,
	    .vcpus = 2,
	    .kernel = "/img/vmlinux",
	    .initrd = "/img/initramfs.lz4",
	    .cmdline = cmdline,
	    .disk = "/state/j1.qcow2",
	    .network = evil_net,
	    .mac = "52:54:00:12:34:56",
	    .filter = "airlock-service",
	    .ports = ports,
	    .nports = 2,
	    .channel_sock = "/state/j1.sock",
	    .channel_name = "airlock.0",
	    .console = evil_console,
	};
	char *xml = al_vm_domain_xml(&d);

	TAP_OK(load(xml), "the document parses");
	TAP_OK(!strcmp(xp("string(/domain/devices/interface/source/@network)"), evil_net) &&
		   !strcmp(xp("string(/domain/devices/serial/source/@path)"), evil_console) &&
		   !strcmp(xp("string(/domain/os/cmdline)"), cmdline),
	       "the network name, console path and command line come back as they went in");
	TAP_OK(!strcmp(xp("count(//evil)"), "0") && !strcmp(xp("count(//@onload)"), "0") &&
		   !strcmp(xp("count(/domain/devices/interface)"), "1") &&
		   !strcmp(xp("count(/domain/devices/*)"), "5"),
	       "quotes and markup in them add no element or attribute");
	TAP_OK(!strcmp(xp("string(/domain/@type)"), "qemu") &&
		   !strcmp(xp("string(/domain/name)"), "al-svc-j1") &&
		   !strcmp(xp("string(/domain/memory)"), "384") &&
		   !strcmp(xp("string(/domain/memory/@unit)"), "MiB") &&
		   !strcmp(xp("string(/domain/vcpu)"), "2") &&
		   !strcmp(xp("string(/domain/os/kernel)"), "/img/vmlinux") &&
		   !strcmp(xp("string(/domain/cpu/model)"), "qemu64") &&
		   !strcmp(xp("string(/domain/cpu/feature/@name)"), "rdrand") &&
		   !strcmp(xp("string(/domain/on_crash)"), "destroy"),
	       "type, name, memory, vcpus, kernel, a TCG CPU with rdrand, destroyed on a crash");
	TAP_OK(!strcmp(xp("count(/domain/devices/disk)"), "1") &&
		   !strcmp(xp("string(/domain/devices/disk/source/@file)"), "/state/j1.qcow2") &&
		   !strcmp(xp("string(/domain/devices/channel/source/@path)"), "/state/j1.sock") &&
		   !strcmp(xp("string(/domain/devices/channel/target/@name)"), "airlock.0"),
	       "its own disk, its channel's socket and name");
	TAP_OK(!strcmp(xp("string(//filterref/@filter)"), "airlock-service") &&
		   !strcmp(xp("count(//filterref/parameter[@name='PORT'])"), "2") &&
		   !strcmp(xp("string(//filterref/parameter[@name='PORT'][2]/@value)"), "9000") &&
		   !strcmp(xp("count(//filterref/parameter[@name='PROXY_IP'])"), "0"),
	       "the ports filter: one PORT per port, no proxy without egress");
	free(xml);

	d.nports = 0;
	d.proxy_ip = "10.77.0.1";
	d.proxy_port = 3128;
	d.filter = "airlock-service-egress";
	d.image = "/img/python.ext4";
	d.console = NULL;
	d.host_cpu = true;
	d.type = "kvm";
	xml = al_vm_domain_xml(&d);
	TAP_OK(load(xml) &&
		   !strcmp(xp("string(//filterref/parameter[@name='PORT']/@value)"), "0") &&
		   !strcmp(xp("string(//filterref/parameter[@name='PROXY_IP']/@value)"),
			   "10.77.0.1") &&
		   !strcmp(xp("string(//filterref/parameter[@name='PROXY_PORT']/@value)"), "3128"),
	       "no port at all: PORT 0; egress: the proxy's address and port");
	TAP_OK(!strcmp(xp("count(/domain/devices/disk)"), "2") &&
		   !strcmp(xp("string(/domain/devices/disk[2]/source/seclabel/@relabel)"), "no") &&
		   !strcmp(xp("count(/domain/devices/disk[2]/readonly)"), "1") &&
		   !strcmp(xp("string(/domain/devices/disk[2]/target/@dev)"), "vdb"),
	       "the catalogue image: a second disk, read only, never relabelled");
	TAP_OK(!strcmp(xp("string(/domain/devices/serial/@type)"), "null") &&
		   !strcmp(xp("string(/domain/cpu/@mode)"), "host-passthrough"),
	       "no console: a null serial; KVM: the host's CPU");
	free(xml);
	d.mac = NULL;
	TAP_OK(al_vm_domain_xml(&d) == NULL, "a value missing: no document at all");
	xmlFreeDoc(doc);
	return tap_done();
}
