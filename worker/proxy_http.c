/* proxy_http.c - the proxy's HTTP/1 message layer: a request head read
 * and checked (the request line, the authority, dropped headers), a plain
 * request rewritten for its origin (and its cache key made), a reply to a
 * client before any tunnel exists, a small write to a socket. Calls
 * nothing of the proxy's other files. */
#include "proxy_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/clock.h"

/* Headers of a plain HTTP request that the proxy does not pass on: its own
 * (Proxy-*), hop-by-hop ones, what would claim another client address for
 * the job, and Host, which it sets from the checked authority (so a server
 * on an allowed address cannot be told it serves another name). */
static const char *const dropped_headers[] = {
    "proxy-",
    "connection:",
    "keep-alive:",
    "host:",
    "upgrade:",
    "te:",
    "x-forwarded-for:",
    "x-forwarded-host:",
    "x-forwarded-proto:",
    "x-real-ip:",
    "forwarded:",
    "via:",
    "trailer:",
};

void px_reply(struct tunnel *t, int code, const char *status, const char *why)
{
	struct evbuffer *o = bufferevent_get_output(t->in);

	evbuffer_add_printf(o,
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			    "Content-Length: %zu\r\n\r\nairlock egress: %s\n",
			    code, status, strlen(why) + 17, why);
}

/* The job's bytes h (n of them) as the host its transcript shows: what is
 * not printable ASCII as \xNN, so that no byte a job sends can make its
 * result undecodable (the result's text fields are UTF-8). */
static void host_shown(char *out, size_t cap, const char *h, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 5 < cap; i++) {
		unsigned char ch = (unsigned char)h[i];

		if (ch > ' ' && ch < 0x7f && ch != '\\')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
	}
	out[o] = '\0';
}

/* A host name or address literal: letters, digits, '.', '-', '_', ':'. */
static bool host_chars_ok(const char *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && !strchr(".-_:", h[i]))
			return false;
	return true;
}

/* host[:port] or [v6]:port into t; dflt when there is no port. A refused
 * one leaves t->host showing what was asked for, escaped. */
static bool parse_authority(struct tunnel *t, const char *a, size_t n, unsigned dflt)
{
	const char *end = a + n, *colon = NULL, *h = a, *he;
	unsigned long port = dflt;

	if (n && a[0] == '[') {
		h = a + 1;
		he = memchr(a, ']', n);
		if (!he)
			return false;
		if (he + 1 < end) {
			if (he[1] != ':')
				return false;
			colon = he + 1;
		}
	} else {
		colon = memchr(a, ':', n);
		he = colon ? colon : end;
	}
	if (colon) {
		char *stop;

		port = strtoul(colon + 1, &stop, 10);
		if (stop != end || colon + 1 == end || port == 0 || port > 65535)
			return false;
	}
	host_shown(t->host, sizeof(t->host), h, (size_t)(he - h));
	if (he == h || (size_t)(he - h) >= sizeof(t->host) || !host_chars_ok(h, (size_t)(he - h)))
		return false;
	t->port = (unsigned)port;
	return true;
}

static bool header_dropped(const char *h)
{
	for (size_t i = 0; i < sizeof(dropped_headers) / sizeof(dropped_headers[0]); i++)
		if (!strncasecmp(h, dropped_headers[i], strlen(dropped_headers[i])))
			return true;
	return false;
}

/* Files a package index serves under one name once (a version's archive):
 * a response for such a path, complete and with no caching headers, is
 * kept until evicted; other paths only as long as their max-age says. */
static bool artifact_path(const char *path, size_t n)
{
	static const char *const ext[] = {".tar.gz",  ".tgz", ".tar.xz", ".tar.bz2",
					  ".tar.zst", ".zip", ".whl",	 ".crate",
					  ".deb",     ".jar", ".gem",	 ".nupkg"};
	const char *q = memchr(path, '?', n);

	if (q)
		n = (size_t)(q - path);
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t l = strlen(ext[i]);

		if (n > l && !strncasecmp(path + n - l, ext[i], l))
			return true;
	}
	return false;
}

/* See proxy_int.h. */
bool px_request(struct tunnel *t, struct evbuffer *in, const char *method, const char *path,
		const char *version, bool https)
{
	unsigned dflt = https ? 443 : 80;
	bool cacheable = false;
	EVP_MD_CTX *md = NULL;
	size_t n;

	/* a GET may come from the cache: its key is the URL and the headers a
	 * response varies with (a plain http key stays as it always was) */
	if (t->e->cache_dir && !strcmp(method, "GET") && (md = EVP_MD_CTX_new()) &&
	    EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		char url[512];
		int ul = snprintf(url, sizeof(url), "GET %s%s:%u%s\n", https ? "https://" : "",
				  t->host, t->port, path ? path : "/");

		cacheable = ul > 0 && (size_t)ul < sizeof(url);
		EVP_DigestUpdate(md, url, cacheable ? (size_t)ul : 0);
		t->artifact = path && artifact_path(path, strlen(path));
	}
	evbuffer_add_printf(t->fwd, "%s %s %s\r\n", method, path ? path : "/", version);
	evbuffer_add_printf(t->fwd, strchr(t->host, ':') ? "Host: [%s]" : "Host: %s", t->host);
	if (t->port != dflt)
		evbuffer_add_printf(t->fwd, ":%u", t->port);
	evbuffer_add_printf(t->fwd, "\r\n");
	for (;;) {
		char *h = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);

		if (!h) {
			EVP_MD_CTX_free(md);
			return false;
		}
		if (n == 0) {
			free(h);
			break;
		}
		if (!header_dropped(h))
			evbuffer_add_printf(t->fwd, "%s\r\n", h);
		/* what is personal or partial is never cached */
		if (!strncasecmp(h, "range:", 6) || !strncasecmp(h, "authorization:", 14) ||
		    !strncasecmp(h, "cookie:", 7) || !strncasecmp(h, "content-length:", 15) ||
		    !strncasecmp(h, "transfer-encoding:", 18))
			cacheable = false;
		else if (cacheable && (!strncasecmp(h, "accept:", 7) ||
				       !strncasecmp(h, "accept-encoding:", 16))) {
			EVP_DigestUpdate(md, h, n);
			EVP_DigestUpdate(md, "\n", 1);
		}
		free(h);
	}
	evbuffer_add_printf(t->fwd, "Connection: close\r\n\r\n");
	if (cacheable) {
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned dl = 0;

		EVP_DigestFinal_ex(md, d, &dl);
		for (unsigned i = 0; i < dl && i < 32; i++)
			snprintf(t->ckey + 2 * i, 3, "%02x", d[i]);
	}
	EVP_MD_CTX_free(md);
	return true;
}

int px_head_complete(struct tunnel *t, struct evbuffer *in)
{
	if (evbuffer_search(in, "\r\n\r\n", 4, NULL).pos >= 0)
		return 1;
	if (evbuffer_get_length(in) > HEAD_MAX) {
		px_reply(t, 431, "Request Header Fields Too Large", "request head too long");
		return -1;
	}
	return 0;
}

char *px_request_line(struct evbuffer *in, char **target, char **version)
{
	size_t n;
	char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);
	char *sp1, *sp2;

	if (!line || !(sp1 = strchr(line, ' ')) || !(sp2 = strchr(sp1 + 1, ' ')) ||
	    strncmp(sp2 + 1, "HTTP/1.", 7)) {
		free(line);
		return NULL;
	}
	*sp1 = *sp2 = '\0';
	*target = sp1 + 1;
	*version = sp2 + 1;
	return line;
}

/* The request line and headers: CONNECT host:port, or METHOD http://host/path.
 * Plain HTTP gets its head rewritten (px_request: origin-form target, Host
 * from the checked authority, no dropped_headers, Connection: close: one
 * request per connection, so a second request cannot name another host). */
int px_parse_head(struct tunnel *t, struct evbuffer *in, struct al_err *err)
{
	size_t n;
	char *target, *version, *line = px_request_line(in, &target, &version);
	bool ok = false;
	const char *why = "a malformed request";

	if (!line)
		goto out_line;
	if (!strcmp(line, "CONNECT")) {
		t->connect = true;
		t->intercept = t->e->intercept; /* px_tls_begin decides */
		ok = parse_authority(t, target, strlen(target), 0) && t->port;
		/* the rest of the head is the proxy's: dropped */
		while (ok) {
			char *h = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF);

			if (!h)
				break;
			free(h);
			if (n == 0)
				break;
		}
		goto out_line;
	}
	if (strncasecmp(target, "http://", 7)) {
		why = "only CONNECT (for https) and http:// requests go through the proxy";
		goto out_line;
	}
	{
		const char *auth = target + 7, *path = strchr(auth, '/');
		size_t alen = path ? (size_t)(path - auth) : strlen(auth);

		ok = parse_authority(t, auth, alen, 80) && (t->fwd = evbuffer_new()) &&
		     px_request(t, in, line, path, version, false);
	}
out_line:
	free(line);
	return ok ? AL_OK : al_err_set(err, AL_EINVAL, "%s", why);
}

/* Write all of buf to a fresh non-blocking socket (a reply or a head:
 * small); false when it would not take it. */
bool px_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}
