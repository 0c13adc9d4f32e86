/* domxml.c - a service VM's libvirt domain XML (see domxml.h). */
#include "domxml.h"

#include <libxml/tree.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The builder: a failure (out of memory) is remembered and every later
 * step does nothing, so the document is whole or not made at all. */
struct xb {
	bool bad;
};

static xmlNodePtr child(struct xb *b, xmlNodePtr parent, const char *name, const char *text)
{
	xmlNodePtr n;

	if (b->bad)
		return NULL;
	/* xmlNewTextChild escapes the text (xmlNewChild would not) */
	n = xmlNewTextChild(parent, NULL, (const xmlChar *)name, (const xmlChar *)text);
	b->bad = !n;
	return n;
}

static void prop(struct xb *b, xmlNodePtr n, const char *name, const char *value)
{
	if (!b->bad && !xmlNewProp(n, (const xmlChar *)name, (const xmlChar *)value))
		b->bad = true;
}

/* <parent><name a1=v1 a2=v2 ...> with NULL-terminated pairs. */
static xmlNodePtr elem(struct xb *b, xmlNodePtr parent, const char *name, ...)
{
	xmlNodePtr n = child(b, parent, name, NULL);
	va_list ap;
	const char *k, *v;

	va_start(ap, name);
	while ((k = va_arg(ap, const char *))) {
		v = va_arg(ap, const char *);
		if (v)
			prop(b, n, k, v);
		else
			b->bad = true; /* a value missing: no document, never a part */
	}
	va_end(ap);
	return n;
}

static void param(struct xb *b, xmlNodePtr filter, const char *name, unsigned value)
{
	char v[16];

	snprintf(v, sizeof(v), "%u", value);
	elem(b, filter, "parameter", "name", name, "value", v, NULL);
}

static void devices(struct xb *b, xmlNodePtr dev, const struct al_vm_domain *d)
{
	xmlNodePtr disk, iface, filter, chan, serial;

	disk = elem(b, dev, "disk", "type", "file", "device", "disk", NULL);
	elem(b, disk, "driver", "name", "qemu", "type", "qcow2", NULL);
	elem(b, disk, "source", "file", d->disk, NULL);
	elem(b, disk, "target", "dev", "vda", "bus", "virtio", NULL);
	if (d->image) { /* read only, shared by VMs: libvirt must not relabel it */
		xmlNodePtr src;

		disk = elem(b, dev, "disk", "type", "file", "device", "disk", NULL);
		elem(b, disk, "driver", "name", "qemu", "type", "raw", NULL);
		src = elem(b, disk, "source", "file", d->image, NULL);
		elem(b, src, "seclabel", "model", "dac", "relabel", "no", NULL);
		elem(b, disk, "target", "dev", "vdb", "bus", "virtio", NULL);
		child(b, disk, "readonly", NULL);
	}
	iface = elem(b, dev, "interface", "type", "network", NULL);
	elem(b, iface, "source", "network", d->network, NULL);
	elem(b, iface, "mac", "address", d->mac, NULL);
	elem(b, iface, "model", "type", "virtio", NULL);
	filter = elem(b, iface, "filterref", "filter", d->filter, NULL);
	if (d->proxy_ip) {
		elem(b, filter, "parameter", "name", "PROXY_IP", "value", d->proxy_ip, NULL);
		param(b, filter, "PROXY_PORT", d->proxy_port);
	}
	for (size_t i = 0; i < d->nports; i++)
		param(b, filter, "PORT", d->ports[i]);
	if (d->nports == 0) /* no port at all: a value no TCP packet carries */
		param(b, filter, "PORT", 0);
	chan = elem(b, dev, "channel", "type", "unix", NULL);
	elem(b, chan, "source", "mode", "bind", "path", d->channel_sock, NULL);
	elem(b, chan, "target", "type", "virtio", "name", d->channel_name, NULL);
	if (d->console) {
		serial = elem(b, dev, "serial", "type", "file", NULL);
		elem(b, serial, "source", "path", d->console, "append", "on", NULL);
	} else {
		elem(b, dev, "serial", "type", "null", NULL);
	}
	elem(b, dev, "memballoon", "model", "none", NULL);
}

char *al_vm_domain_xml(const struct al_vm_domain *d)
{
	struct xb b = {false};
	xmlDocPtr doc = xmlNewDoc((const xmlChar *)"1.0");
	xmlNodePtr root = doc ? xmlNewDocNode(doc, NULL, (const xmlChar *)"domain", NULL) : NULL;
	xmlNodePtr os, type, cpu;
	xmlChar *text = NULL;
	char n[32], *out = NULL;
	int len = 0;

	if (!root)
		goto out_doc;
	xmlDocSetRootElement(doc, root);
	prop(&b, root, "type", d->type);
	child(&b, root, "name", d->name);
	snprintf(n, sizeof(n), "%llu", (unsigned long long)d->memory_mib);
	prop(&b, child(&b, root, "memory", n), "unit", "MiB");
	snprintf(n, sizeof(n), "%u", d->vcpus ? d->vcpus : 1);
	child(&b, root, "vcpu", n);
	os = child(&b, root, "os", NULL);
	type = child(&b, os, "type", "hvm");
	prop(&b, type, "arch", "x86_64");
	prop(&b, type, "machine", "pc");
	child(&b, os, "kernel", d->kernel);
	child(&b, os, "initrd", d->initrd);
	child(&b, os, "cmdline", d->cmdline);
	if (d->host_cpu) {
		elem(&b, root, "cpu", "mode", "host-passthrough", NULL);
	} else {
		cpu = elem(&b, root, "cpu", "mode", "custom", "match", "exact", NULL);
		prop(&b, child(&b, cpu, "model", "qemu64"), "fallback", "allow");
		elem(&b, cpu, "feature", "policy", "require", "name", "rdrand", NULL);
	}
	child(&b, root, "on_poweroff", "destroy");
	child(&b, root, "on_reboot", "destroy");
	child(&b, root, "on_crash", "destroy");
	devices(&b, child(&b, root, "devices", NULL), d);
	if (b.bad)
		goto out_doc;
	xmlDocDumpMemory(doc, &text, &len);
	if (text && len > 0 && (out = malloc((size_t)len + 1))) {
		memcpy(out, text, (size_t)len);
		out[len] = '\0';
	}
out_doc:
	xmlFree(text);
	xmlFreeDoc(doc);
	return out;
}
