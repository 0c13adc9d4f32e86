/* egress.c - allow rules for a job's outbound connections (egress.h). */
#include "egress.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A DNS name: labels of [A-Za-z0-9-_], dots between, no empty label. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s), label = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_') ||
		    ++label > 63)
			return false;
	}
	return label > 0;
}

static int bad(struct al_err *err, const char *text, const char *why)
{
	return al_err_set(
	    err, AL_EINVAL,
	    "egress rule \"%.80s\": %s (use host:port, *.domain:port, ADDR/PREFIX:port "
	    "or [V6/PREFIX]:port)",
	    text, why);
}

/* Keep the first prefix bits of a (len bytes). */
static void mask(uint8_t *a, size_t len, unsigned prefix)
{
	for (size_t i = 0; i < len; i++) {
		unsigned keep = prefix >= 8 * (i + 1) ? 8 : prefix > 8 * i ? prefix - 8 * i : 0;

		a[i] &= (uint8_t)(0xff00u >> keep);
	}
}

static int parse_range(const char *spec, struct al_egress_rule *r, const char *text,
		       struct al_err *err)
{
	char addr[64];
	const char *slash = strchr(spec, '/');
	char *end;
	unsigned long prefix;

	if (!slash || (size_t)(slash - spec) >= sizeof(addr))
		return bad(err, text, "an address range needs /PREFIX");
	snprintf(addr, sizeof(addr), "%.*s", (int)(slash - spec), spec);
	r->family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(r->family, addr, r->addr) != 1)
		return bad(err, text, "not an IP address");
	prefix = strtoul(slash + 1, &end, 10);
	if (end == slash + 1 || *end || prefix > (r->family == AF_INET ? 32u : 128u))
		return bad(err, text, "prefix out of range");
	r->prefix = (unsigned)prefix;
	mask(r->addr, r->family == AF_INET ? 4 : 16, r->prefix);
	r->range = true;
	return AL_OK;
}

int al_egress_rule_parse(const char *text, struct al_egress_rule *r, struct al_err *err)
{
	char hostpart[300];
	const char *colon;
	char *end;
	unsigned long port;

	memset(r, 0, sizeof(*r));
	if (strlen(text) > AL_EGRESS_RULE_MAX)
		return bad(err, text, "too long");
	snprintf(r->text, sizeof(r->text), "%s", text);
	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || close[1] != ':')
			return bad(err, text, "expected [V6/PREFIX]:port");
		snprintf(hostpart, sizeof(hostpart), "%.*s", (int)(close - text - 1), text + 1);
		colon = close + 1;
	} else {
		if (!(colon = strrchr(text, ':')) || strchr(text, ':') != colon)
			return bad(err, text, "expected one :port");
		snprintf(hostpart, sizeof(hostpart), "%.*s", (int)(colon - text), text);
	}
	port = strtoul(colon + 1, &end, 10);
	if (end == colon + 1 || *end || port == 0 || port > 65535)
		return bad(err, text, "the port must be 1..65535");
	r->port = (uint16_t)port;
	if (strchr(hostpart, '/'))
		return parse_range(hostpart, r, text, err);
	if (!strncmp(hostpart, "*.", 2)) {
		r->wildcard = true;
		memmove(hostpart, hostpart + 2, strlen(hostpart + 2) + 1);
	}
	if (!name_ok(hostpart) || strchr(hostpart, '*'))
		return bad(err, text, "not a host name");
	{
		unsigned char probe[16];

		if (inet_pton(AF_INET, hostpart, probe) == 1)
			return bad(err, text,
				   "an address is allowed as a range (ADDR/32), not a name");
	}
	snprintf(r->host, sizeof(r->host), "%s", hostpart);
	return AL_OK;
}

static bool name_under(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s + 1 && name[n - s - 1] == '.' && !strcasecmp(name + n - s, suffix);
}

int al_egress_match_name(const struct al_egress_rule *r, size_t n, const char *host, unsigned port)
{
	unsigned char probe[16];

	if (inet_pton(AF_INET, host, probe) == 1 || inet_pton(AF_INET6, host, probe) == 1)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (r[i].range || r[i].port != port)
			continue;
		if (r[i].wildcard ? name_under(host, r[i].host) : !strcasecmp(host, r[i].host))
			return (int)i;
	}
	return -1;
}

/* sa's address as bytes in the family of the ranges: a v4-mapped IPv6
 * address is its IPv4 address. */
static int addr_bytes(const struct sockaddr *sa, uint8_t out[16])
{
	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(out, a->s6_addr + 12, 4);
			return AF_INET;
		}
		memcpy(out, a->s6_addr, 16);
		return AF_INET6;
	}
	return -1;
}

int al_egress_match_range(const struct al_egress_rule *r, size_t n, const struct sockaddr *sa,
			  unsigned port)
{
	uint8_t a[16];
	int fam = addr_bytes(sa, a);

	for (size_t i = 0; i < n; i++) {
		uint8_t m[16];

		if (!r[i].range || r[i].family != fam || r[i].port != port)
			continue;
		memcpy(m, a, 16);
		mask(m, fam == AF_INET ? 4 : 16, r[i].prefix);
		if (!memcmp(m, r[i].addr, fam == AF_INET ? 4 : 16))
			return (int)i;
	}
	return -1;
}

bool al_egress_rule_within(const struct al_egress_rule *sub, const struct al_egress_rule *rule)
{
	if (sub->port != rule->port || sub->range != rule->range)
		return false;
	if (sub->range) {
		uint8_t m[16];

		if (sub->family != rule->family || sub->prefix < rule->prefix)
			return false;
		memcpy(m, sub->addr, 16);
		mask(m, sub->family == AF_INET ? 4 : 16, rule->prefix);
		return !memcmp(m, rule->addr, sub->family == AF_INET ? 4 : 16);
	}
	if (!rule->wildcard)
		return !sub->wildcard && !strcasecmp(sub->host, rule->host);
	return name_under(sub->host, rule->host) ||
	       (sub->wildcard && !strcasecmp(sub->host, rule->host));
}

static bool v4_internal(uint32_t a)
{
	return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 || (a >> 20) == 0xac1 ||
	       (a >> 16) == 0xc0a8 || (a >> 22) == (100u << 2 | 1) || (a >> 16) == 0xa9fe ||
	       (a >> 28) >= 0xe || (a >> 8) == 0xc00000 || (a >> 17) == (198u << 7 | 9);
}

bool al_addr_internal(const struct sockaddr *sa, char *text, size_t cap)
{
	text[0] = '\0';
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, text, (socklen_t)cap);
		return v4_internal(ntohl(in->sin_addr.s_addr));
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		const uint8_t *b = a->s6_addr;

		inet_ntop(AF_INET6, a, text, (socklen_t)cap);
		if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a))
			return v4_internal((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 |
					   (uint32_t)b[14] << 8 | b[15]);
		return IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) ||
		       IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_SITELOCAL(a) ||
		       IN6_IS_ADDR_MULTICAST(a) || (b[0] & 0xfe) == 0xfc; /* fc00::/7 */
	}
	return true; /* not an internet address at all */
}
