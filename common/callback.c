/* callback.c - where a job's webhook may go: its URL against the tier's
 * callback_hosts, and the address it is about to connect to (callback.h). */
#include "callback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "egress.h"

/* The host (lower case, IPv6 without brackets) and port of an http(s) URL;
 * false when it has neither form. */
static bool url_host_port(const char *url, char *host, size_t cap, unsigned *port)
{
	const char *p, *end, *auth_end;
	size_t n;

	if (!strncmp(url, "http://", 7))
		*port = 80, p = url + 7;
	else if (!strncmp(url, "https://", 8))
		*port = 443, p = url + 8;
	else
		return false;
	auth_end = p + strcspn(p, "/?#");
	for (const char *at = p; at < auth_end; at++)
		if (*at == '@')
			p = at + 1; /* user:password@ */
	if (*p == '[') {
		end = memchr(p, ']', (size_t)(auth_end - p));
		if (!end)
			return false;
		p++;
	} else {
		end = p + strcspn(p, ":/?#");
		if (end > auth_end)
			end = auth_end;
	}
	n = (size_t)(end - p);
	if (n == 0 || n >= cap)
		return false;
	for (size_t i = 0; i < n; i++)
		host[i] = (char)((p[i] >= 'A' && p[i] <= 'Z') ? p[i] + 32 : p[i]);
	host[n] = '\0';
	if (*end == ']')
		end++;
	if (*end == ':') {
		char *stop;
		unsigned long v = strtoul(end + 1, &stop, 10);

		if (stop == end + 1 || stop != auth_end || v == 0 || v > 65535)
			return false;
		*port = (unsigned)v;
	} else if (end != auth_end) {
		return false;
	}
	return true;
}

/* One callback_hosts entry: "host" (the scheme's default port only) or
 * "host:port" ("[v6]:port"). */
static bool entry_matches(const char *entry, const char *host, unsigned port, unsigned dflt)
{
	char eh[256];
	unsigned ep = dflt;
	const char *colon = strrchr(entry, ':');
	size_t n;

	if (entry[0] == '[') {
		const char *close = strchr(entry, ']');

		if (!close)
			return false;
		n = (size_t)(close - entry - 1);
		memcpy(eh, entry + 1, n < sizeof(eh) ? n : sizeof(eh) - 1);
		eh[n < sizeof(eh) ? n : sizeof(eh) - 1] = '\0';
		if (close[1] == ':')
			ep = (unsigned)strtoul(close + 2, NULL, 10);
	} else if (colon && strchr(entry, ':') == colon) {
		n = (size_t)(colon - entry);
		snprintf(eh, sizeof(eh), "%.*s", (int)n, entry);
		ep = (unsigned)strtoul(colon + 1, NULL, 10);
	} else {
		snprintf(eh, sizeof(eh), "%s", entry); /* a host, or a bare IPv6 address */
	}
	return !strcasecmp(eh, host) && ep == port;
}

int al_callback_url_ok(char *const *hosts, size_t n, const char *url, const char *tier,
		       struct al_err *err)
{
	char host[256];
	unsigned port;

	if (!url_host_port(url, host, sizeof(host), &port))
		return al_err_set(
		    err, AL_EINVAL,
		    "callback_url: \"%.100s\" is not an http:// or https:// URL with a host", url);
	for (size_t i = 0; i < n; i++)
		if (entry_matches(hosts[i], host, port, url[4] == 's' ? 443 : 80))
			return AL_OK;
	return al_err_set(
	    err, AL_EINVAL,
	    "callback_url: host \"%s\" port %u is not allowed for tier %s (callback_hosts "
	    "names \"host\" for the scheme's default port, \"host:port\" for another)",
	    host, port, tier);
}

bool al_callback_addr_ok(char *const *hosts, size_t n, const struct sockaddr *sa, char *text,
			 size_t cap)
{
	bool internal = al_addr_internal(sa, text, cap);

	if (!internal)
		return true;
	/* an internal address only where the policy names that very address */
	for (size_t i = 0; i < n; i++) {
		char h[256];
		const char *e = hosts[i], *end;

		if (*e == '[')
			e++, end = strchr(e, ']');
		else
			end = strchr(e, ':') == strrchr(e, ':') ? strchr(e, ':') : NULL;
		snprintf(h, sizeof(h), "%.*s", end ? (int)(end - e) : (int)strlen(e), e);
		if (text[0] && !strcmp(h, text))
			return true;
	}
	return false;
}
