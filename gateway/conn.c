/* conn.c - the gateway's connections: a cap on how many, and on a
 * request's line, headers and time to send them (gw.h).
 *
 * libevent 2.1 has neither a connection cap nor a header timeout apart
 * from its idle one, and answers oversized headers by closing. So every
 * connection's bufferevent is a filter over the socket's (or TLS's): while
 * a request's headers are incomplete, the filter leaves its bytes in the
 * socket's buffer and passes nothing on. That bounds what is buffered
 * (GW_HEADERS_MAX, then 431), lets the idle timeout count from the last
 * byte passed, i.e. from the request's start (a slowloris that sends a byte
 * a second is still dropped), and its free callback counts connections.
 *
 * libevent 2.1's filter moves what evhttp writes only when its write side
 * is enabled at the moment of writing, or when the socket's write event
 * fires; evhttp writes a reply's head before it enables that side, and the
 * socket's event fires once at the start. So a reply written after the
 * first round stays in the filter: each write kicks a flush on the next
 * turn of the loop (conn_kick), by when evhttp has enabled it.
 *
 * And evhttp counts a reply sent once the filter has passed it on; a
 * connection that closes after its reply is shut down at that moment. So
 * the output side writes to the socket at once what the kernel takes, and
 * keeps the rest in the filter (conn_out) until it is taken: nothing an
 * answer says is lost to a close. (TLS writes at once by itself.) */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "gw.h"

enum conn_state {
	C_HEAD,	   /* holding a request's bytes until its headers end */
	C_PASS,	   /* headers whole: the body, and the request's answer */
	C_SKIP,	   /* a refused request's body (413, 501): read and dropped, then C_HEAD */
	C_REFUSED, /* answered 414/431; whatever comes is dropped till the timeout */
};

struct gw_conn {
	struct gw *g;
	struct bufferevent *bev; /* the filter, as evhttp knows it */
	struct gw_conn *prev, *next;
	enum conn_state state;
	int refused;		   /* 414 or 431 */
	int refusal;		   /* 413 or 501: the stand-in request's answer, once */
	char refusal_why[160];	   /* ...and what it says */
	uint64_t skip;		   /* C_SKIP: body bytes still to drop */
	struct event *kick;	   /* flushes what evhttp wrote (see the top) */
	struct bufferevent *under; /* the socket's (or TLS's) bufferevent */
	bool tls;
	size_t scanned; /* bytes of the held request already searched */
};

/* Where the headers held in b end (index of the last byte + 1), or 0. A
 * line ends in LF or CRLF, as libevent reads it; an empty one ends them. */
static size_t headers_end(const unsigned char *b, size_t n, size_t from)
{
	for (size_t i = from < 1 ? 1 : from; i < n; i++)
		if (b[i] == '\n' &&
		    (b[i - 1] == '\n' || (i >= 2 && b[i - 1] == '\r' && b[i - 2] == '\n')))
			return i + 1;
	return 0;
}

static void refuse(struct gw_conn *c, struct evbuffer *src, struct evbuffer *dst, int code)
{
	c->state = C_REFUSED;
	c->refused = code;
	evbuffer_drain(src, evbuffer_get_length(src));
	/* a request of our own stands in for it; its answer is the refusal */
	evbuffer_add_printf(dst, "GET / HTTP/1.1\r\nHost: refused\r\n\r\n");
	al_log("warn", "request_refused", "status=%d why=%s", code,
	       code == 414 ? "request line too long" : "headers too large");
}

/* The value of header name (lower case, with its colon) in the held
 * headers b[0..n), or NULL; *len its length. */
static const char *header_in(const unsigned char *b, size_t n, const char *name, size_t *len)
{
	size_t k = strlen(name);

	for (size_t i = 0; i + k < n; i++) {
		if (b[i] != '\n' || strncasecmp((const char *)b + i + 1, name, k))
			continue;
		size_t v = i + 1 + k, e;

		while (v < n && (b[v] == ' ' || b[v] == '\t'))
			v++;
		for (e = v; e < n && b[e] != '\r' && b[e] != '\n'; e++)
			;
		*len = e - v;
		return (const char *)b + v;
	}
	return NULL;
}

/* A request the gateway answers without passing it on (its headers are
 * b[0..end)): a body over --max-body (413), a method no route takes (501).
 * Its headers are dropped and a stand-in request passed instead, whose
 * answer is the refusal, in JSON (gw_conn_request); its body is read and
 * dropped (C_SKIP), so that the client, still sending it, reads the answer
 * rather than a reset, and the connection goes on to the next request.
 * Returns whether it refused. */
static bool refuse_body(struct gw_conn *c, struct evbuffer *src, struct evbuffer *dst,
			const unsigned char *b, size_t end)
{
	static const char *const methods[] = {"GET ",	  "POST ",  "PUT ",   "DELETE ", "HEAD ",
					      "OPTIONS ", "PATCH ", "TRACE ", "CONNECT "};
	const char *v;
	size_t len = 0;
	uint64_t body = 0;
	bool known = false, expect = false;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		known |= end > strlen(methods[i]) && !memcmp(b, methods[i], strlen(methods[i]));
	if ((v = header_in(b, end, "content-length:", &len)) && len && len < 20 &&
	    strspn(v, "0123456789") >= len)
		for (size_t i = 0; i < len; i++)
			body = body * 10 + (uint64_t)(v[i] - '0');
	if ((v = header_in(b, end, "expect:", &len)) && len >= 12 &&
	    !strncasecmp(v, "100-continue", 12))
		expect = true;
	if (known && body <= c->g->max_body)
		return false;
	if (!known) {
		size_t m = strcspn((const char *)b, " \r\n");

		c->refusal = 501;
		snprintf(c->refusal_why, sizeof(c->refusal_why),
			 "the method %.*s is not one this API takes (GET, POST, PUT, DELETE)",
			 (int)(m > 32 ? 32 : m), (const char *)b);
	} else {
		c->refusal = 413;
		snprintf(c->refusal_why, sizeof(c->refusal_why),
			 "the request body is %llu bytes, more than this gateway takes (%zu, "
			 "--max-body)",
			 (unsigned long long)body, c->g->max_body);
	}
	evbuffer_drain(src, end);
	/* a client that waits for "100 Continue" sends no body: it is told, and
	 * the connection closes after the answer (nothing of it unread) */
	evbuffer_add_printf(dst, "GET / HTTP/1.1\r\nHost: refused\r\n%s\r\n",
			    expect ? "Connection: close\r\n" : "");
	c->skip = expect ? 0 : body;
	c->state = c->skip ? C_SKIP : C_PASS;
	al_log("warn", "request_refused", "status=%d why=\"%s\"", c->refusal, c->refusal_why);
	return true;
}

static enum bufferevent_filter_result conn_in(struct evbuffer *src, struct evbuffer *dst,
					      ev_ssize_t lim, enum bufferevent_flush_mode mode,
					      void *arg)
{
	struct gw_conn *c = arg;
	size_t n = evbuffer_get_length(src), look, end;
	const unsigned char *b;

	(void)lim;
	(void)mode;
	if (c->state == C_SKIP) {
		size_t k = c->skip < n ? (size_t)c->skip : n;

		evbuffer_drain(src, k);
		if ((c->skip -= k))
			return BEV_OK;
		/* until the stand-in is answered (gw_conn_request), what follows passes */
		c->state = c->refusal ? C_PASS : C_HEAD;
		if (!(n = evbuffer_get_length(src)))
			return BEV_OK;
	}
	if (c->state == C_PASS) {
		evbuffer_add_buffer(dst, src);
		return BEV_OK;
	}
	if (c->state == C_REFUSED) {
		evbuffer_drain(src, n);
		return BEV_OK;
	}
	look = n > GW_HEADERS_MAX ? GW_HEADERS_MAX : n;
	if (!look || !(b = evbuffer_pullup(src, (ev_ssize_t)look)))
		return BEV_NEED_MORE;
	end = headers_end(b, look, c->scanned ? c->scanned - 2 : 0);
	if (!end && !memchr(b, '\n', look < GW_LINE_MAX ? look : GW_LINE_MAX) &&
	    look >= GW_LINE_MAX) {
		refuse(c, src, dst, 414);
		return BEV_OK;
	}
	if (end) {
		c->scanned = 0;
		if (refuse_body(c, src, dst, b, end))
			return BEV_OK;
		c->state = C_PASS;
		evbuffer_add_buffer(dst, src);
		return BEV_OK;
	}
	if (n >= GW_HEADERS_MAX) {
		refuse(c, src, dst, 431);
		return BEV_OK;
	}
	c->scanned = look;
	return BEV_NEED_MORE;
}

/* What evhttp wrote, to the socket: see the top. The one byte left with
 * the socket, when the kernel takes no more, brings its write event, and
 * so this again when it can take more. */
static enum bufferevent_filter_result conn_out(struct evbuffer *src, struct evbuffer *dst,
					       ev_ssize_t lim, enum bufferevent_flush_mode mode,
					       void *arg)
{
	static struct evbuffer *one;
	struct gw_conn *c = arg;
	size_t n;

	(void)lim;
	(void)mode;
	if (evbuffer_get_length(dst))
		return BEV_NEED_MORE; /* the socket is behind: its write event calls again */
	evbuffer_add_buffer(dst, src);
	if (c->tls)
		return BEV_OK;
	evbuffer_write(dst, bufferevent_getfd(c->under));
	if ((n = evbuffer_get_length(dst)) == 0)
		return BEV_OK;
	if (!one && !(one = evbuffer_new()))
		return BEV_OK; /* out of memory: the socket sends it, unless closed first */
	evbuffer_remove_buffer(dst, one, 1);
	evbuffer_add_buffer(src, dst);
	evbuffer_add_buffer(dst, one);
	return BEV_NEED_MORE;
}

static void conn_kick(evutil_socket_t fd, short what, void *arg)
{
	struct gw_conn *c = arg;

	(void)fd;
	(void)what;
	bufferevent_flush(c->bev, EV_WRITE, BEV_NORMAL);
}

static void conn_wrote(struct evbuffer *b, const struct evbuffer_cb_info *info, void *arg)
{
	struct gw_conn *c = arg;

	(void)b;
	if (info->n_added)
		event_active(c->kick, EV_TIMEOUT, 0);
}

static void conn_free(void *arg)
{
	struct gw_conn *c = arg;
	struct gw *g = c->g;

	event_free(c->kick);
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (g->nconns-- == g->max_conns && g->listener)
		evconnlistener_enable(g->listener);
	free(c);
}

/* evhttp's bufferevent for a new connection: the filter over the socket. */
static struct bufferevent *conn_new(struct event_base *base, void *arg)
{
	struct gw *g = arg;
	struct gw_conn *c = calloc(1, sizeof(*c));
	struct bufferevent *under = NULL;

	if (!c || !(c->kick = event_new(base, -1, 0, conn_kick, c))) {
		free(c);
		return NULL;
	}
	if (g->tls) {
		SSL *ssl = SSL_new(g->tls);

		under = ssl ? bufferevent_openssl_socket_new(
				  base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
			    : NULL;
	} else {
		under = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	c->under = under;
	c->tls = g->tls != NULL;
	c->bev = under ? bufferevent_filter_new(under, conn_in, conn_out, BEV_OPT_CLOSE_ON_FREE,
						conn_free, c)
		       : NULL;
	if (!c->bev) {
		if (under)
			bufferevent_free(under);
		event_free(c->kick);
		free(c);
		return NULL; /* evhttp makes a plain one: this connection is not held */
	}
	c->g = g;
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	if (++g->nconns == g->max_conns && g->listener) {
		evconnlistener_disable(g->listener);
		al_log("warn", "connections_full",
		       "connections=%u new ones wait until one closes (--max-connections)",
		       g->nconns);
	}
	if (!evbuffer_add_cb(bufferevent_get_output(c->bev), conn_wrote, c)) {
		bufferevent_free(c->bev); /* and c, counted out (conn_free) */
		return NULL;
	}
	return c->bev;
}

void gw_conns_init(struct gw *g)
{
	evhttp_set_bevcb(g->http, conn_new, g);
	/* what passes the filter is whole headers, bounded; this is a second
	 * line for requests pipelined behind an earlier one */
	evhttp_set_max_headers_size(g->http, GW_HEADERS_MAX + GW_LINE_MAX);
	evhttp_set_timeout(g->http, (int)g->header_s);
}

int gw_conn_request(struct gw *g, struct evhttp_request *r, struct al_err *err)
{
	struct bufferevent *bev =
	    evhttp_connection_get_bufferevent(evhttp_request_get_connection(r));

	for (struct gw_conn *c = g->conns; c; c = c->next)
		if (c->bev == bev) {
			int code = c->refusal;

			if (c->state == C_REFUSED) {
				snprintf(
				    err->msg, sizeof(err->msg),
				    c->refused == 414
					? "the request line is longer than %d bytes"
					: "the request's line and headers are more than %d bytes",
				    c->refused == 414 ? GW_LINE_MAX : GW_HEADERS_MAX);
				return c->refused;
			}
			if (code) { /* the stand-in: its body may still be coming (C_SKIP) */
				snprintf(err->msg, sizeof(err->msg), "%s", c->refusal_why);
				c->refusal = 0;
				if (c->state == C_PASS)
					c->state = C_HEAD;
				return code;
			}
			c->state = C_HEAD; /* the next request's headers are held again */
			return 0;
		}
	return 0;
}

void gw_conn_long(struct evhttp_request *r, bool long_poll, const struct gw *g)
{
	evhttp_connection_set_timeout(evhttp_request_get_connection(r),
				      long_poll ? GW_WAIT_MAX_MS / 1000 + 30 : (int)g->header_s);
}
