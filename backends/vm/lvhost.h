/* lvhost.h - what the worker's vm backend and the scheduler's lease keeper
 * both ask of libvirt about a service VM: the facts of its domain (disk,
 * MAC address, network) and its network's DHCP range, host entries and
 * leases. Domain and network XML are read with libxml2's XPath, never by
 * searching the text. */
#ifndef AL_LVHOST_H
#define AL_LVHOST_H

#include <libvirt/libvirt.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../proto/err.h"

struct al_lv_domain {
	char disk[4096]; /* the first disk's source file, "" when none */
	char mac[18];	 /* the first interface's MAC address, "" when none */
	char net[256];	 /* the network it is on, "" when none */
};

/* Facts of domain d. AL_ESANDBOX when its XML cannot be read. */
int al_lv_domain_facts(virDomainPtr d, struct al_lv_domain *out, struct al_err *err);

/* The first DHCP range of net as host-order IPv4 addresses; false when it
 * has none. */
bool al_lv_net_range(virNetworkPtr net, uint32_t *lo, uint32_t *hi);

/* net's own IPv4 address (the host's side of its bridge); false when none. */
bool al_lv_net_address(virNetworkPtr net, char ip[16]);

/* ip is in use on net: a DHCP host entry or a current lease holds it. */
bool al_lv_net_ip_taken(virNetworkPtr net, const char *ip);

/* The address net's DHCP host entry for mac reserves; false when none. */
bool al_lv_net_host_ip(virNetworkPtr net, const char *mac, char ip[16]);

/* Add (add true) or remove the DHCP host entry mac -> ip of net, in the
 * running network. 0, or -1 when libvirt refused. */
int al_lv_net_host(virNetworkPtr net, bool add, const char *mac, const char *ip);

#endif
