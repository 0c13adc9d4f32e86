/* proxy.c - the egress proxy (proxy.h). One struct tunnel per client
 * connection: read the request head, decide by the rules, resolve, check
 * each address, connect, then relay both ways with backpressure, counting
 * bytes. Every tunnel ends in one transcript entry. */
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

/* ---- the transcript ---- */

static void record(struct tunnel *t)
{
	struct al_egress_conn c = {
	    .host = t->host[0] ? t->host : (char *)"?",
	    .port = t->port,
	    .addr = t->addr,
	    .allowed = t->allowed,
	    .why = t->why,
	    .up = t->up,
	    .down = t->down,
	    .ms = al_mono_ms() - t->t0,
	};

	if (t->e->kept[0]) {
		al_log("info", "egress",
		       "job=%s host=%s port=%u addr=%s allowed=%s up=%llu down=%llu ms=%llu "
		       "why=\"%s\"",
		       t->e->kept, c.host, c.port, c.addr[0] ? c.addr : "-",
		       c.allowed ? "yes" : "no", (unsigned long long)c.up,
		       (unsigned long long)c.down, (unsigned long long)c.ms, c.why);
		return;
	}
	if (al_result_add_egress(&t->e->log, &c))
		t->e->unlisted++;
}

/* ---- replies to the client before any tunnel exists ---- */

void px_reply(struct tunnel *t, int code, const char *status, const char *why)
{
	struct evbuffer *o = bufferevent_get_output(t->in);

	evbuffer_add_printf(o,
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			    "Content-Length: %zu\r\n\r\nairlock egress: %s\n",
			    code, status, strlen(why) + 17, why);
}

/* ---- the head ---- */

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

bool px_head_complete(struct tunnel *t, struct evbuffer *in, const char *where)
{
	if (evbuffer_search(in, "\r\n\r\n", 4, NULL).pos >= 0)
		return true;
	if (evbuffer_get_length(in) > HEAD_MAX) {
		char why[64];

		snprintf(why, sizeof(why), "request head too long%s", where);
		px_reply(t, 431, "Request Header Fields Too Large", "request head too long");
		px_tunnel_end(t, false, why);
	}
	return false;
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
static int parse_head(struct tunnel *t, struct evbuffer *in, struct al_err *err)
{
	size_t n;
	char *target, *version, *line = px_request_line(in, &target, &version);
	bool ok = false;
	const char *why = "a malformed request";

	if (!line)
		goto out;
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
		goto out;
	}
	if (strncasecmp(target, "http://", 7)) {
		why = "only CONNECT (for https) and http:// requests go through the proxy";
		goto out;
	}
	{
		const char *auth = target + 7, *path = strchr(auth, '/');
		size_t alen = path ? (size_t)(path - auth) : strlen(auth);

		ok = parse_authority(t, auth, alen, 80) && (t->fwd = evbuffer_new()) &&
		     px_request(t, in, line, path, version, false);
	}
out:
	free(line);
	return ok ? AL_OK : al_err_set(err, AL_EINVAL, "%s", why);
}

/* ---- the cache: proxy_cache.c ---- */

/* ---- relaying ---- */

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

/* Move what src has into the pipe and from the pipe to dst, as far as both
 * take it now; then wait for whichever is the holdup. */
static void dir_pump(struct dir *d)
{
	struct tunnel *t = d->t;
	struct al_egress *e = t->e;

	for (;;) {
		if (d->inpipe) {
			ssize_t w = splice(d->pipe[0], NULL, d->dst, NULL, d->inpipe,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

			if (w < 0 && errno == EAGAIN) {
				event_del(d->rd);
				event_add(d->wr, NULL);
				return;
			}
			if (w <= 0) {
				px_tunnel_end(t, true, NULL);
				return;
			}
			d->inpipe -= (size_t)w;
			continue;
		}
		if (d->eof) {
			shutdown(d->dst, SHUT_WR);
			event_del(d->rd);
			event_del(d->wr);
			if (t->d[0].eof && t->d[1].eof && !t->d[0].inpipe && !t->d[1].inpipe)
				px_tunnel_end(t, true, NULL);
			return;
		}
		{
			size_t room = RELAY_CHUNK;
			ssize_t r;

			if (e->max_bytes && e->used >= e->max_bytes) {
				snprintf(t->why, sizeof(t->why),
					 "%s; cut: the job's max_bytes of %llu reached",
					 e->rules[t->rule].text, (unsigned long long)e->max_bytes);
				px_tunnel_end(t, true, NULL);
				return;
			}
			if (e->max_bytes && e->max_bytes - e->used < room)
				room = (size_t)(e->max_bytes - e->used);
			r = splice(d->src, NULL, d->pipe[1], NULL, room,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (r < 0 && errno == EAGAIN) {
				event_del(d->wr);
				event_add(d->rd, NULL);
				return;
			}
			if (r < 0) {
				px_tunnel_end(t, true, NULL);
				return;
			}
			if (r == 0) {
				d->eof = true;
				continue;
			}
			d->inpipe += (size_t)r;
			if (t->fill && d == &t->d[1])
				px_fill_tee(t, d->pipe[0], (size_t)r);
			*d->count += (uint64_t)r;
			e->used += (uint64_t)r;
			t->last_ms = al_mono_ms();
		}
	}
}

static void on_dir(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	dir_pump(arg);
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	struct timeval tv = {1, 0};

	(void)fd;
	(void)what;
	if (al_mono_ms() - t->last_ms >= t->e->idle_ms) {
		snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
			 "; closed: idle %llu ms", (unsigned long long)t->e->idle_ms);
		px_tunnel_end(t, true, NULL);
		return;
	}
	evtimer_add(t->idle_ev, &tv);
}

/* Relaying from now on: closed when silent both ways for idle_ms (the
 * tunnel ended when the timer cannot be made). */
void px_idle_start(struct tunnel *t)
{
	struct timeval tv = {1, 0};

	t->last_ms = al_mono_ms();
	if (!(t->idle_ev = evtimer_new(t->e->base, on_idle, t))) {
		snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
			 "; closed: the proxy could not relay (out of memory)");
		px_tunnel_end(t, true, NULL);
		return;
	}
	evtimer_add(t->idle_ev, &tv);
}

/* Connected: the first bytes (the 200 of a CONNECT, or the rewritten head
 * and whatever the client sent after it), then the sockets leave their
 * bufferevents and each direction is spliced. */
static void start_relay(struct tunnel *t)
{
	struct evbuffer *extra = bufferevent_get_input(t->in);
	int fin = dup(bufferevent_getfd(t->in)), fout = dup(bufferevent_getfd(t->out));
	bool ok = fin >= 0 && fout >= 0;

	t->relaying = true;
	snprintf(t->why, sizeof(t->why), "%s", t->e->rules[t->rule].text);
	if (ok && t->connect) {
		if (!t->established) /* else proxy_tls.c sent it before the first byte */
			ok = px_write_all(fin, PX_ESTABLISHED, sizeof(PX_ESTABLISHED) - 1);
	} else if (ok) {
		size_t n = evbuffer_get_length(t->fwd);

		t->up += n;
		t->e->used += n;
		ok = px_write_all(fout, evbuffer_pullup(t->fwd, -1), n);
		if (ok && !evbuffer_get_length(extra))
			px_fill_start(t); /* a GET with no body: its response may be kept */
	}
	if (ok && evbuffer_get_length(extra)) {
		size_t n = evbuffer_get_length(extra);

		t->up += n;
		t->e->used += n;
		ok = px_write_all(fout, evbuffer_pullup(extra, -1), n);
	}
	bufferevent_free(t->in);
	bufferevent_free(t->out);
	t->in = t->out = NULL;
	t->spliced = true;
	t->d[0] = (struct dir){t, fin, fout, {-1, -1}, 0, false, NULL, NULL, &t->up};
	t->d[1] = (struct dir){t, fout, fin, {-1, -1}, 0, false, NULL, NULL, &t->down};
	for (int i = 0; ok && i < 2; i++) {
		struct dir *d = &t->d[i];

		ok = !pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) &&
		     (d->rd = event_new(t->e->base, d->src, EV_READ | EV_PERSIST, on_dir, d)) &&
		     (d->wr = event_new(t->e->base, d->dst, EV_WRITE | EV_PERSIST, on_dir, d));
		if (ok)
			fcntl(d->pipe[1], F_SETPIPE_SZ, (int)RELAY_CHUNK);
	}
	if (!ok) {
		snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
			 "; closed: the proxy could not relay (out of memory)");
		px_tunnel_end(t, true, NULL);
		return;
	}
	px_idle_start(t);
	if (!t->idle_ev)
		return;
	event_add(t->d[0].rd, NULL);
	event_add(t->d[1].rd, NULL);
}

/* ---- connecting: each address the name resolved to, checked first ---- */

static void on_connect(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		start_relay(t);
		return;
	}
	px_connect_failed(t);
}

void px_connect_failed(struct tunnel *t)
{
	snprintf(t->why, sizeof(t->why), "%s: connect failed", t->addr);
	bufferevent_free(t->out);
	t->out = NULL;
	t->cur = t->cur->ai_next;
	px_try_next(t);
}

void px_try_next(struct tunnel *t)
{
	for (; t->cur; t->cur = t->cur->ai_next) {
		const struct sockaddr *sa = t->cur->ai_addr;
		int range = al_egress_match_range(t->e->rules, t->e->nrules, sa, t->port);
		bool internal = al_addr_internal(sa, t->addr, sizeof(t->addr));

		if (t->literal ? range < 0 : internal && range < 0) {
			snprintf(t->why, sizeof(t->why),
				 t->literal
				     ? "%s: no range rule names this address and port"
				     : "%s: an internal address (loopback, private, link-local, "
				       "metadata...) that no range rule names",
				 t->addr);
			continue;
		}
		if (t->literal || internal)
			t->rule = range;
		if (t->intercept && !t->inner && px_tls_begin(t))
			return; /* the client's first byte decides (proxy_tls.c) */
		if (t->intercept && t->inner) {
			if (px_tls_connect(t))
				return;
			snprintf(t->why, sizeof(t->why), "%s: connect failed", t->addr);
			continue;
		}
		if (px_cache_serve(t)) { /* allowed now, as if connecting */
			px_tunnel_end(t, true, NULL);
			return;
		}
		if (!(t->out = bufferevent_socket_new(t->e->base, -1, BEV_OPT_CLOSE_ON_FREE)))
			break;
		bufferevent_setcb(t->out, NULL, NULL, on_connect, t);
		if (bufferevent_socket_connect(t->out, sa, (int)t->cur->ai_addrlen) == 0)
			return;
		bufferevent_free(t->out);
		t->out = NULL;
		snprintf(t->why, sizeof(t->why), "%s: connect failed", t->addr);
	}
	px_reply(t, 403, "Forbidden", t->why[0] ? t->why : "no address to connect to");
	px_tunnel_end(t, false, NULL);
}

static void resolved(struct tunnel *t, int code, struct evutil_addrinfo *res)
{
	if (code) {
		snprintf(t->why, sizeof(t->why), "cannot resolve %s: %s", t->host,
			 evutil_gai_strerror(code));
		px_reply(t, 502, "Bad Gateway", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	t->ai = t->cur = res;
	px_try_next(t);
}

static void on_resolved(int code, struct evutil_addrinfo *res, void *arg)
{
	struct tunnel *t = arg;

	if (code == EVUTIL_EAI_CANCEL)
		return;	    /* the tunnel is being freed */
	if (t->resolving) { /* answered before evdns_getaddrinfo returned */
		t->answered = true;
		t->sync_code = code;
		t->sync_res = res;
		return;
	}
	t->req = NULL;
	resolved(t, code, res);
}

/* ---- a new client connection ---- */

static void on_head(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	unsigned char probe[16];
	struct al_err err = {0};
	char port[8];

	if (!px_head_complete(t, in, ""))
		return;
	bufferevent_disable(bev, EV_READ);
	if (parse_head(t, in, &err)) {
		px_reply(t, 400, "Bad Request", err.msg);
		px_tunnel_end(t, false, err.msg);
		return;
	}
	t->literal =
	    inet_pton(AF_INET, t->host, probe) == 1 || inet_pton(AF_INET6, t->host, probe) == 1;
	if (!t->literal &&
	    (t->rule = al_egress_match_name(t->e->rules, t->e->nrules, t->host, t->port)) < 0) {
		snprintf(t->why, sizeof(t->why), "no rule allows %s:%u", t->host, t->port);
		px_reply(t, 403, "Forbidden", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	snprintf(port, sizeof(port), "%u", t->port);
	if (t->literal)
		hints.ai_flags = EVUTIL_AI_NUMERICHOST;
	t->resolving = true;
	t->req = evdns_getaddrinfo(t->e->dns, t->host, port, &hints, on_resolved, t);
	t->resolving = false;
	if (t->answered) {
		t->req = NULL;
		resolved(t, t->sync_code, t->sync_res);
	} else if (!t->req) {
		resolved(t, EVUTIL_EAI_FAIL, NULL);
	}
}

static void on_head_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		px_tunnel_end(arg, false, "the client went before its request");
}

/* A client connection: its tunnel, reading the request head. */
/* Tunnels open in this process, and how many its descriptor budget holds. */
static unsigned tunnels_open, tunnels_max;

void al_egress_set_fd_budget(unsigned fds)
{
	tunnels_max = fds / AL_EGRESS_FDS_PER_TUNNEL;
	if (fds && !tunnels_max)
		tunnels_max = 1;
}

static void take_client(struct al_egress *e, evutil_socket_t fd)
{
	struct tunnel *t = calloc(1, sizeof(*t));
	struct timeval head = {10, 0};

	if (!t || !(t->in = bufferevent_socket_new(e->base, fd, BEV_OPT_CLOSE_ON_FREE))) {
		evutil_closesocket(fd);
		free(t);
		e->unlisted++;
		return;
	}
	t->e = e;
	t->rule = -1;
	t->t0 = al_mono_ms();
	t->next = e->live;
	if (e->live)
		e->live->prev = &t->next;
	t->prev = &e->live;
	e->live = t;
	if (e->max_conns && e->conns >= e->max_conns) {
		snprintf(t->why, sizeof(t->why), "the job's max_connections of %u reached",
			 e->max_conns);
		px_reply(t, 403, "Forbidden", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	if (e->max_open && e->open >= e->max_open) {
		snprintf(t->why, sizeof(t->why), "the job's max_open of %u tunnels at once reached",
			 e->max_open);
		px_reply(t, 403, "Forbidden", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	if (tunnels_max && tunnels_open >= tunnels_max) {
		snprintf(t->why, sizeof(t->why),
			 "the worker's descriptors for tunnels are in use (%u open, all jobs); "
			 "try again",
			 tunnels_open);
		px_reply(t, 503, "Service Unavailable", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	e->conns++;
	e->open++;
	tunnels_open++;
	t->counted = true;
	bufferevent_setcb(t->in, on_head, NULL, on_head_event, t);
	bufferevent_set_timeouts(t->in, &head, NULL);
	bufferevent_enable(t->in, EV_READ | EV_WRITE);
}

/* A unix listener (a microVM's, egress_fwd.c): each connection carries one
 * guest connection's socket (SCM_RIGHTS with one byte), which becomes the
 * client; anything else, or nothing within HANDOFF_MS, is dropped. */
#define HANDOFF_MS 5000

struct handoff {
	struct al_egress *e;
	struct handoff *next, **prev;
	struct event *ev;
	int fd;
};

static void handoff_free(struct handoff *h)
{
	if (h->next)
		h->next->prev = h->prev;
	*h->prev = h->next;
	if (h->ev)
		event_free(h->ev);
	close(h->fd);
	free(h);
}

static void on_handoff(evutil_socket_t fd, short what, void *arg)
{
	struct handoff *h = arg;
	struct al_egress *e = h->e;
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	ssize_t n = -1;
	int got = -1;
	struct stat st;

	if (what & EV_READ) /* extra descriptors past one are closed by the kernel */
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && (what & EV_READ) && (errno == EAGAIN || errno == EINTR))
		return; /* the persistent event comes again */
	for (struct cmsghdr *c = n == 1 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&got, CMSG_DATA(c), sizeof(int));
	handoff_free(h);
	if (got >= 0 && (fstat(got, &st) || !S_ISSOCK(st.st_mode))) {
		close(got);
		got = -1;
	}
	if (got >= 0) {
		evutil_make_socket_nonblocking(got);
		take_client(e, got);
	}
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	struct al_egress *e = arg;
	struct handoff *h;
	struct timeval tv = {HANDOFF_MS / 1000, 0};

	(void)l;
	(void)len;
	if (sa->sa_family != AF_UNIX) {
		take_client(e, fd);
		return;
	}
	if (!(h = calloc(1, sizeof(*h)))) {
		evutil_closesocket(fd);
		return;
	}
	h->e = e;
	h->fd = fd;
	h->next = e->handoffs;
	if (e->handoffs)
		e->handoffs->prev = &h->next;
	h->prev = &e->handoffs;
	e->handoffs = h;
	if (!(h->ev = event_new(e->base, fd, EV_READ | EV_PERSIST, on_handoff, h)) ||
	    event_add(h->ev, &tv))
		handoff_free(h);
}

/* ---- ending ---- */

static void tunnel_free(struct tunnel *t)
{
	if (t->req)
		evdns_getaddrinfo_cancel(t->req); /* calls on_resolved with CANCEL */
	if (t->ai)
		evutil_freeaddrinfo(t->ai);
	if (t->fwd)
		evbuffer_free(t->fwd);
	if (t->out)
		bufferevent_free(t->out);
	if (t->in)
		bufferevent_free(t->in);
	for (int i = 0; t->spliced && i < 2; i++) {
		if (t->d[i].rd)
			event_free(t->d[i].rd);
		if (t->d[i].wr)
			event_free(t->d[i].wr);
		for (int k = 0; k < 2; k++)
			if (t->d[i].pipe[k] >= 0)
				close(t->d[i].pipe[k]);
		close(t->d[i].src); /* each socket once: d[1].src is d[0].dst */
	}
	if (t->idle_ev)
		event_free(t->idle_ev);
	px_tls_free(t);
	px_fill_drop(t);
	if (t->counted) {
		t->e->open--;
		tunnels_open--;
	}
	*t->prev = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free(t);
}

/* The client's side closes once what is queued for it (a reply, the end of
 * a response) has gone out. */
static void on_flushed(struct bufferevent *bev, void *arg)
{
	(void)bev;
	tunnel_free(arg);
}

static void on_flushed_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	tunnel_free(arg);
}

void px_tunnel_end(struct tunnel *t, bool allowed, const char *why)
{
	struct timeval linger = {5, 0};

	t->allowed = allowed && (t->relaying || t->hit);
	if (why)
		snprintf(t->why, sizeof(t->why), "%s", why);
	if (t->allowed)
		px_fill_end(t);
	px_fill_drop(t);
	record(t);
	if (t->req) {
		evdns_getaddrinfo_cancel(t->req);
		t->req = NULL;
	}
	if (t->out) {
		bufferevent_free(t->out);
		t->out = NULL;
	}
	if (!t->in || !evbuffer_get_length(bufferevent_get_output(t->in))) {
		tunnel_free(t);
		return;
	}
	bufferevent_setcb(t->in, NULL, on_flushed, on_flushed_event, t);
	bufferevent_setwatermark(t->in, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(t->in, NULL, &linger);
	bufferevent_disable(t->in, EV_READ);
	bufferevent_enable(t->in, EV_WRITE);
	t->relaying = false;
	t->lingering = true;
}

struct al_egress *al_egress_new(struct event_base *base, struct evdns_base *dns, int listen_fd,
				const struct al_egress_rule *rules, size_t nrules,
				uint64_t max_bytes, uint32_t max_connections, uint32_t max_open,
				uint64_t idle_ms)
{
	struct al_egress *e = calloc(1, sizeof(*e));

	if (!e || !(e->rules = calloc(nrules ? nrules : 1, sizeof(*rules)))) {
		free(e);
		evutil_closesocket(listen_fd);
		return NULL;
	}
	memcpy(e->rules, rules, nrules * sizeof(*rules));
	e->nrules = nrules;
	e->base = base;
	e->dns = dns;
	e->max_bytes = max_bytes;
	e->max_conns = max_connections;
	e->max_open = max_open;
	e->idle_ms = idle_ms ? idle_ms : AL_EGRESS_IDLE_MS;
	evutil_make_socket_nonblocking(listen_fd);
	e->lst = evconnlistener_new(base, on_accept, e,
				    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, listen_fd);
	if (!e->lst) {
		evutil_closesocket(listen_fd);
		al_egress_free(e);
		return NULL;
	}
	return e;
}

/* Empty the transcript. */
static void clear_log(struct al_egress *e)
{
	e->log.id = NULL; /* only its egress list is ours */
	al_result_free(&e->log);
	memset(&e->log, 0, sizeof(e->log));
	e->unlisted = 0;
}

/* The transcript so far into res (a count of what did not fit too); it
 * starts again empty. */
static void move_transcript(struct al_egress *e, struct al_result *res)
{
	for (size_t i = 0; i < e->log.negress; i++)
		if (al_result_add_egress(res, &e->log.egress[i]))
			e->unlisted++;
	if (e->unlisted) {
		char n[24];

		snprintf(n, sizeof(n), "%llu", (unsigned long long)e->unlisted);
		al_result_add_info(res, "egress_unlisted", n);
	}
	if (e->hits || e->stored) {
		char c[96];

		snprintf(c, sizeof(c), "%llu hits (%llu bytes), %llu stored",
			 (unsigned long long)e->hits, (unsigned long long)e->hit_bytes,
			 (unsigned long long)e->stored);
		al_result_add_info(res, "egress_cache", c);
		e->hits = e->hit_bytes = e->stored = 0;
	}
	clear_log(e);
}

static void on_keep_end(evutil_socket_t fd, short what, void *arg)
{
	struct al_egress *e = arg;

	(void)fd;
	(void)what;
	al_log("info", "egress_end", "job=%s", e->kept);
	al_egress_finish(e, NULL);
	al_egress_free(e);
}

void al_egress_keep(struct al_egress *e, struct al_result *res, uint64_t ms, const char *job)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

	if (!e)
		return;
	move_transcript(e, res);
	snprintf(e->kept, sizeof(e->kept), "%s", job);
	if (!(e->keep_ev = evtimer_new(e->base, on_keep_end, e)) || evtimer_add(e->keep_ev, &tv))
		on_keep_end(-1, 0, e); /* fail closed: no proxy without its end */
}

void al_egress_finish(struct al_egress *e, struct al_result *res)
{
	if (!e)
		return;
	if (e->lst) {
		evconnlistener_free(e->lst);
		e->lst = NULL;
	}
	while (e->handoffs)
		handoff_free(e->handoffs);
	for (struct tunnel *t = e->live, *next; t; t = next) {
		next = t->next;
		if (t->lingering)
			continue;
		if (t->relaying)
			snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
				 "; closed: the job ended");
		px_tunnel_end(t, true, t->relaying ? NULL : "the job ended before the request");
	}
	if (res)
		move_transcript(e, res);
}

void al_egress_free(struct al_egress *e)
{
	if (!e)
		return;
	while (e->live)
		tunnel_free(e->live);
	while (e->handoffs)
		handoff_free(e->handoffs);
	if (e->keep_ev)
		event_free(e->keep_ev);
	if (e->lst)
		evconnlistener_free(e->lst);
	free(e->rules);
	free(e->cache_dir);
	free(e->up_ca);
	clear_log(e);
	free(e);
}
