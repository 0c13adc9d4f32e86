/* lvhost.c - libvirt facts of service VMs and their networks (lvhost.h). */
#include "lvhost.h"

#include <arpa/inet.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The string value of expr in xml (first match), at most cap-1 bytes; false
 * when the XML does not parse or nothing matches. */
static bool xpath_str(const char *xml, const char *expr, char *out, size_t cap)
{
	xmlDocPtr doc;
	xmlXPathContextPtr ctx = NULL;
	xmlXPathObjectPtr obj = NULL;
	xmlChar *v = NULL;
	bool ok = false;

	out[0] = '\0';
	if (!xml)
		return false;
	doc = xmlReadMemory(xml, (int)strlen(xml), "libvirt.xml", NULL, XML_PARSE_NONET);
	if (doc && (ctx = xmlXPathNewContext(doc)) &&
	    (obj = xmlXPathEvalExpression((const xmlChar *)expr, ctx)) &&
	    (v = xmlXPathCastToString(obj)) && v[0] && strlen((const char *)v) < cap) {
		snprintf(out, cap, "%s", (const char *)v);
		ok = true;
	}
	xmlFree(v);
	xmlXPathFreeObject(obj);
	xmlXPathFreeContext(ctx);
	xmlFreeDoc(doc);
	return ok;
}

int al_lv_domain_facts(virDomainPtr d, struct al_lv_domain *out, struct al_err *err)
{
	char *xml = virDomainGetXMLDesc(d, 0);

	memset(out, 0, sizeof(*out));
	if (!xml)
		return al_err_set(err, AL_ESANDBOX, "vm: cannot read a domain's XML");
	xpath_str(xml, "string(/domain/devices/disk[1]/source/@file)", out->disk,
		  sizeof(out->disk));
	xpath_str(xml, "string(/domain/devices/interface[1]/mac/@address)", out->mac,
		  sizeof(out->mac));
	xpath_str(xml, "string(/domain/devices/interface[1]/source/@network)", out->net,
		  sizeof(out->net));
	free(xml);
	return AL_OK;
}

static uint32_t ipv4(const char *text)
{
	struct in_addr a;

	return inet_pton(AF_INET, text, &a) == 1 ? ntohl(a.s_addr) : 0;
}

bool al_lv_net_range(virNetworkPtr net, uint32_t *lo, uint32_t *hi)
{
	char *xml = virNetworkGetXMLDesc(net, 0);
	char a[64], b[64];
	bool ok = xpath_str(xml, "string(/network/ip/dhcp/range[1]/@start)", a, sizeof(a)) &&
		  xpath_str(xml, "string(/network/ip/dhcp/range[1]/@end)", b, sizeof(b));

	free(xml);
	*lo = ok ? ipv4(a) : 0;
	*hi = ok ? ipv4(b) : 0;
	return *lo && *hi >= *lo;
}

bool al_lv_net_address(virNetworkPtr net, char ip[16])
{
	char *xml = virNetworkGetXMLDesc(net, 0), a[64];
	bool ok = xpath_str(xml, "string(/network/ip[not(@family) or @family='ipv4'][1]/@address)",
			    a, sizeof(a)) &&
		  ipv4(a) != 0;

	free(xml);
	if (ok)
		snprintf(ip, 16, "%s", a);
	return ok;
}

/* An XPath string literal of a value we made or got from libvirt (an IP or
 * a MAC address: no quote in it). */
static bool plain(const char *s)
{
	return s[0] && !strpbrk(s, "'\"<>&");
}

bool al_lv_net_ip_taken(virNetworkPtr net, const char *ip)
{
	char *xml = virNetworkGetXMLDesc(net, 0), expr[128], got[64];
	virNetworkDHCPLeasePtr *leases = NULL;
	bool taken;
	int n;

	if (!plain(ip)) {
		free(xml);
		return true;
	}
	snprintf(expr, sizeof(expr), "string(/network/ip/dhcp/host[@ip='%s']/@ip)", ip);
	taken = xpath_str(xml, expr, got, sizeof(got));
	free(xml);
	n = virNetworkGetDHCPLeases(net, NULL, &leases, 0);
	for (int i = 0; i < n; i++) {
		taken = taken || (leases[i]->ipaddr && !strcmp(leases[i]->ipaddr, ip));
		virNetworkDHCPLeaseFree(leases[i]);
	}
	free(leases);
	return taken;
}

bool al_lv_net_host_ip(virNetworkPtr net, const char *mac, char ip[16])
{
	char *xml, expr[128];
	bool ok;

	ip[0] = '\0';
	if (!plain(mac))
		return false;
	xml = virNetworkGetXMLDesc(net, 0);
	snprintf(expr, sizeof(expr), "string(/network/ip/dhcp/host[@mac='%s']/@ip)", mac);
	ok = xpath_str(xml, expr, ip, 16) && ipv4(ip);
	free(xml);
	return ok;
}

int al_lv_net_host(virNetworkPtr net, bool add, const char *mac, const char *ip)
{
	char host[160];

	if (!plain(mac) || !plain(ip) ||
	    snprintf(host, sizeof(host), "<host mac='%s' ip='%s'/>", mac, ip) >= (int)sizeof(host))
		return AL_EINVAL;
	return virNetworkUpdate(net,
				add ? VIR_NETWORK_UPDATE_COMMAND_ADD_LAST
				    : VIR_NETWORK_UPDATE_COMMAND_DELETE,
				VIR_NETWORK_SECTION_IP_DHCP_HOST, -1, host,
				VIR_NETWORK_UPDATE_AFFECT_CURRENT) == 0
		   ? 0
		   : -1;
}
