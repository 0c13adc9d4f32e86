/* egress.h - what a job's network may reach: the allow rules of a tier's
 * `egress:` policy (and a job's narrower `egress_allow`), and the checks the
 * egress proxy makes before it connects. Everything not allowed is denied.
 *
 * A rule is "host:port" (an exact name, case-insensitive), "*.suffix:port"
 * (any name under suffix, not suffix itself) or "ADDR/PREFIX:port" (an
 * address range, "[v6/prefix]:port" for IPv6). A name rule lets the proxy
 * connect to what the name resolves to, as long as that address is public;
 * an internal address (loopback, private, link-local and the metadata
 * endpoint, CGNAT, unique-local, multicast, v4-mapped forms of these) only
 * when a range rule names it with that port. A request for a literal
 * address is allowed only by a range rule. */
#ifndef AL_EGRESS_H
#define AL_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../proto/err.h"

#define AL_EGRESS_RULES_MAX 32
#define AL_EGRESS_RULE_MAX  300 /* bytes of one rule's text */
/* A tier's caps on one job's egress when its policy names none. */
#define AL_EGRESS_DEFAULT_BYTES (1ull << 30) /* both directions, in all */
#define AL_EGRESS_DEFAULT_CONNS 1024	     /* connections tried, in all */
#define AL_EGRESS_DEFAULT_OPEN	64	     /* tunnels open at once */

struct al_egress_rule {
	char text[AL_EGRESS_RULE_MAX + 1]; /* as written (the transcript names it) */
	char host[256];			   /* name, or the suffix of a wildcard ("" for a range) */
	bool wildcard;			   /* "*.host" */
	bool range;			   /* an address range */
	int family;			   /* AF_INET or AF_INET6 (ranges) */
	uint8_t addr[16];		   /* the range's network, prefix bits kept */
	unsigned prefix;
	uint16_t port;
};

/* Parse one rule; AL_EINVAL naming what is wrong. */
int al_egress_rule_parse(const char *text, struct al_egress_rule *r, struct al_err *err);

/* The index of the first name rule allowing host:port, or -1. A literal
 * address as host matches no name rule. */
int al_egress_match_name(const struct al_egress_rule *r, size_t n, const char *host, unsigned port);
/* The index of the first range rule holding sa with port, or -1. */
int al_egress_match_range(const struct al_egress_rule *r, size_t n, const struct sockaddr *sa,
			  unsigned port);
/* Whether a sub-rule is within rule: the same, a name (or narrower
 * wildcard) under a wildcard, a range inside a range, with the same port. */
bool al_egress_rule_within(const struct al_egress_rule *sub, const struct al_egress_rule *rule);

/* Loopback, private, shared (CGNAT), link-local (169.254.169.254, the
 * cloud metadata endpoint), unspecified, multicast and reserved IPv4; the
 * same for IPv6 plus unique-local and v4-mapped/compatible forms. text
 * gets the address (cap bytes). */
bool al_addr_internal(const struct sockaddr *sa, char *text, size_t cap);

#endif
