/* proxy_tls.c - https ended by the egress proxy, so that its cache serves
 * it too (wk_proxy_set_intercept). A CONNECT whose name and address passed
 * the rules gets its 200; if the client then speaks TLS, the proxy answers
 * with a leaf for the name it asked for (egress_ca.c: the job trusts the
 * worker's CA through its bundle), reads the one request inside, serves
 * it from the cache or opens its own TLS to the same address (the real
 * server's certificate checked against the host's store and the tier's
 * ca_file), sends the request rewritten as for plain http (Connection:
 * close) and relays the answer, keeping a copy when it is cacheable. A
 * client that does not speak TLS gets the byte tunnel it always did. */
#include <errno.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "egress_ca.h"
#include "proxy_int.h"

#define PEEK_MS 10000 /* the client's first byte after the 200, at most this late */

static void tls_free(struct tunnel *t)
{
	if (t->peek_ev) {
		event_free(t->peek_ev);
		t->peek_ev = NULL;
	}
}

/* The last TLS error of bev, as text (or what else went wrong). */
static void tls_error(struct bufferevent *bev, char *out, size_t cap)
{
	unsigned long e = bufferevent_get_openssl_error(bev);

	if (e)
		ERR_error_string_n(e, out, cap);
	else
		snprintf(out, cap, "%s", errno ? strerror(errno) : "closed");
	ERR_clear_error();
}

/* ---- relaying the request and its answer ---- */

static struct bufferevent *other(struct tunnel *t, struct bufferevent *bev)
{
	return bev == t->in ? t->out : t->in;
}

/* What bev read goes to the other side, counted against the job's cap; an
 * answer's bytes into the fill too. A side whose output is full stops the
 * other reading until it drained (on_write). */
static void on_read(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct wk_proxy *e = t->e;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct bufferevent *to = other(t, bev);
	size_t n = evbuffer_get_length(in);

	if (!n)
		return;
	if (e->max_bytes && e->used + n > e->max_bytes) {
		snprintf(t->why, sizeof(t->why), "%s; cut: the job's max_bytes of %llu reached",
			 e->rules[t->rule].text, (unsigned long long)e->max_bytes);
		px_fill_drop(t);
		px_tunnel_end(t, true, NULL);
		return;
	}
	if (bev == t->out && t->fill)
		px_fill_add(t, in, n);
	*(bev == t->out ? &t->down : &t->up) += n;
	e->used += n;
	t->last_ms = al_mono_ms();
	evbuffer_remove_buffer(in, bufferevent_get_output(to), n);
	if (evbuffer_get_length(bufferevent_get_output(to)) >= RELAY_CHUNK)
		bufferevent_disable(bev, EV_READ);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;

	bufferevent_enable(other(t, bev), EV_READ);
}

/* The server's end (EOF after its Connection: close) is the answer's: the
 * tunnel ends, the client's side closing once what it has is out (and the
 * copy becoming an entry if it is whole). The client going ends it too. */
static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;

	if (what & BEV_EVENT_ERROR) {
		char msg[200];

		tls_error(bev, msg, sizeof(msg));
		snprintf(t->why + strlen(t->why), sizeof(t->why) - strlen(t->why),
			 "; closed: %s: %s", bev == t->out ? "the server" : "the client", msg);
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		px_tunnel_end(t, true, NULL);
}

static void relay(struct tunnel *t)
{
	struct evbuffer *body = bufferevent_get_input(t->in);
	size_t n = evbuffer_get_length(t->fwd);

	t->relaying = true;
	snprintf(t->why, sizeof(t->why), "%s; https ended by the proxy for its cache",
		 t->e->rules[t->rule].text);
	t->up += n;
	t->e->used += n;
	evbuffer_add_buffer(bufferevent_get_output(t->out), t->fwd);
	if (!evbuffer_get_length(body))
		px_fill_start(t); /* a GET with no body: its answer may be kept */
	bufferevent_setcb(t->in, on_read, on_write, on_event, t);
	bufferevent_setcb(t->out, on_read, on_write, on_event, t);
	bufferevent_setwatermark(t->in, EV_WRITE, RELAY_CHUNK / 2, 0);
	bufferevent_setwatermark(t->out, EV_WRITE, RELAY_CHUNK / 2, 0);
	bufferevent_set_timeouts(t->in, NULL, NULL);
	px_idle_start(t);
	if (!t->idle_ev)
		return;
	bufferevent_enable(t->in, EV_READ | EV_WRITE);
	bufferevent_enable(t->out, EV_READ | EV_WRITE);
	on_read(t->in, t); /* a body's first bytes, already here */
}

/* ---- the server's side ---- */

static void on_server(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	unsigned long e;
	char msg[200] = "";

	if (what & BEV_EVENT_CONNECTED) {
		relay(t);
		return;
	}
	e = bufferevent_get_openssl_error(bev);
	if (e)
		ERR_error_string_n(e, msg, sizeof(msg));
	ERR_clear_error();
	if (v != X509_V_OK || e) {
		/* it answered but is not who the job asked for: no other address */
		snprintf(t->why, sizeof(t->why), "%s: TLS with the server for %s failed: %.150s",
			 t->addr, t->host, v != X509_V_OK ? X509_verify_cert_error_string(v) : msg);
		px_reply(t, 502, "Bad Gateway", t->why);
		px_tunnel_end(t, false, NULL);
		return;
	}
	px_connect_failed(t);
}

static bool tls_connect(struct tunnel *t)
{
	struct al_err err = {0};
	SSL *ssl = wk_egress_ca_connect(t->host, t->literal, t->e->up_ca, &err);

	if (!ssl) {
		al_log("warn", "egress_tls", "host=%s note=\"%s\"", t->host, err.msg);
		return false;
	}
	t->out = bufferevent_openssl_socket_new(t->e->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
						BEV_OPT_CLOSE_ON_FREE);
	if (!t->out) {
		SSL_free(ssl);
		return false;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(t->out, 1);
	bufferevent_setcb(t->out, NULL, NULL, on_server, t);
	if (bufferevent_socket_connect(t->out, t->cur->ai_addr, (int)t->cur->ai_addrlen) == 0)
		return true;
	bufferevent_free(t->out);
	t->out = NULL;
	return false;
}

/* ---- the client's side: TLS with the proxy's leaf, then one request ---- */

static void on_inner_head(struct bufferevent *bev, void *arg)
{
	int rc;
	struct tunnel *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line, *path, *version;
	bool ok;

	if ((rc = px_head_complete(t, in)) <= 0) {
		if (rc < 0)
			px_tunnel_end(t, false, "request head too long (inside https)");
		return;
	}
	bufferevent_disable(bev, EV_READ);
	line = px_request_line(in, &path, &version);
	ok = line != NULL;
	if (ok) {
		/* origin-form, or an absolute https URL whose authority is not
		 * looked at: the tunnel's host is the only one it reaches */
		if (!strncasecmp(path, "https://", 8))
			path = strchr(path + 8, '/');
		ok = strcmp(line, "CONNECT") && (!path || path[0] == '/') &&
		     (t->fwd = evbuffer_new()) && px_request(t, in, line, path, version, true);
	}
	free(line);
	if (!ok) {
		px_reply(t, 400, "Bad Request", "a malformed request inside https");
		px_tunnel_end(t, false, "a malformed request inside https");
		return;
	}
	t->inner = true;
	if (px_cache_serve(t)) {
		px_tunnel_end(t, true, NULL);
		return;
	}
	px_try_next(t); /* the same address first, now with TLS (tls_connect) */
}

static void on_inner_event(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;
	char msg[200], why[WHY_MAX];

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	tls_error(bev, msg, sizeof(msg));
	if (what & BEV_EVENT_TIMEOUT)
		snprintf(why, sizeof(why), "no request inside https within %d s", PEEK_MS / 1000);
	else if (what & BEV_EVENT_ERROR)
		snprintf(why, sizeof(why),
			 "the job's TLS with the proxy failed (%s; does its client trust the "
			 "bundle at " AL_CA_BUNDLE "?)",
			 msg);
	else
		snprintf(why, sizeof(why), "the client went before its request");
	px_tunnel_end(t, false, why);
}

static void on_peek(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;
	struct timeval head = {PEEK_MS / 1000, 0};
	struct al_err err = {0};
	unsigned char b;
	ssize_t n = (what & EV_READ) ? recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) : -1;
	SSL *ssl;
	int dupfd;

	if (n < 0 && (what & EV_READ) && (errno == EAGAIN || errno == EINTR)) {
		event_add(t->peek_ev, &head);
		return;
	}
	tls_free(t);
	if (n <= 0) {
		px_tunnel_end(t, false,
			      n == 0 ? "the client went before its request"
				     : "the client sent nothing after CONNECT within 10 s");
		return;
	}
	if (b != 0x16) { /* not a TLS handshake: a byte tunnel */
		t->intercept = false;
		px_try_next(t);
		return;
	}
	if (!(ssl = wk_egress_ca_accept(t->host, t->literal, &err))) {
		px_tunnel_end(t, false, err.msg);
		return;
	}
	if ((dupfd = dup(fd)) < 0) {
		SSL_free(ssl);
		px_tunnel_end(t, false, "the proxy is out of descriptors");
		return;
	}
	bufferevent_free(t->in);
	t->in = bufferevent_openssl_socket_new(t->e->base, dupfd, ssl, BUFFEREVENT_SSL_ACCEPTING,
					       BEV_OPT_CLOSE_ON_FREE);
	if (!t->in) {
		SSL_free(ssl);
		close(dupfd);
		px_tunnel_end(t, false, "the proxy is out of memory");
		return;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(t->in, 1);
	bufferevent_setcb(t->in, on_inner_head, NULL, on_inner_event, t);
	bufferevent_set_timeouts(t->in, &head, NULL);
	bufferevent_enable(t->in, EV_READ | EV_WRITE);
}

static bool tls_begin(struct tunnel *t)
{
	struct timeval tv = {PEEK_MS / 1000, 0};
	int fd = bufferevent_getfd(t->in);

	if (evbuffer_get_length(bufferevent_get_input(t->in))) {
		t->intercept = false; /* it did not wait for the 200 */
		return false;
	}
	if (!px_write_all(fd, PX_ESTABLISHED, sizeof(PX_ESTABLISHED) - 1)) {
		px_tunnel_end(t, false, "the client went before its request");
		return true;
	}
	t->established = true;
	if (!(t->peek_ev = event_new(t->e->base, fd, EV_READ, on_peek, t)) ||
	    event_add(t->peek_ev, &tv)) {
		px_tunnel_end(t, false, "the proxy is out of memory");
		return true;
	}
	return true;
}

int wk_proxy_set_intercept(struct wk_proxy *e, const char *ca_file)
{
	if (!e->cache_dir || !wk_egress_ca_file())
		return AL_ESYS;
	free(e->up_ca);
	e->up_ca = NULL;
	if (ca_file && !(e->up_ca = strdup(ca_file)))
		return AL_ESYS;
	e->intercept = true;
	return 0;
}

const struct px_tls_ops px_tls_ops = {
    .begin = tls_begin,
    .connect = tls_connect,
    .free = tls_free,
};
