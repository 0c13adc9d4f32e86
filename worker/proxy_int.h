/* proxy_int.h - what the egress proxy's files share (proxy.c: tunnels,
 * the head, relaying, ending; proxy_cache.c: the cache; proxy_tls.c: https
 * ended by the proxy for the cache). Not for use outside them. */
#ifndef AL_WORKER_PROXY_INT_H
#define AL_WORKER_PROXY_INT_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <stdbool.h>
#include <stdint.h>

#include "proxy.h"

#define HEAD_MAX       16384 /* a request head longer than this is refused */
#define PX_ESTABLISHED "HTTP/1.1 200 Connection established\r\n\r\n" /* to a CONNECT */
#define WHY_MAX	       512
#define RELAY_CHUNK    (1u << 20) /* bytes per splice, and each pipe's size, while relaying */

struct tunnel;
struct handoff;

struct wk_proxy {
	struct event_base *base;
	struct evdns_base *dns;
	struct evconnlistener *lst;
	struct al_egress_rule *rules;
	size_t nrules;
	uint64_t max_bytes, used, idle_ms;
	uint32_t max_conns, conns;
	uint32_t max_open, open; /* tunnels at once */
	struct tunnel *live;
	struct handoff *handoffs; /* a unix listener's connections, before their socket came */
	bool unix_clients;	  /* wk_proxy_unix_clients: no handoff, the connection itself */
	struct al_result log;	  /* only its egress list is used */
	uint64_t unlisted;
	char kept[AL_ID_MAX + 1]; /* wk_proxy_keep: the job's id, each connection logged */
	struct event *keep_ev;	  /* ...and the end of its service */
	char *cache_dir;	  /* wk_proxy_set_cache, or NULL */
	uint64_t cache_max, hits, hit_bytes, stored;
	bool intercept; /* wk_proxy_set_intercept: https ended here for the cache */
	char *up_ca;	/* ...and the servers' certificates checked against this too */
	const struct px_tls_ops *tls; /* the TLS path's (proxy_tls.c) */
};

/* A plain HTTP response on its way into the cache: the downstream bytes,
 * duplicated from the relay's pipe (tee) into tmp, a file in the cache's
 * directory, renamed to the request's key once complete and cacheable. */
struct fill {
	int fd, pipe[2];
	uint64_t bytes;
	bool bad;
	char tmp[4096];
};

struct tunnel {
	struct wk_proxy *e;
	struct tunnel *next, **prev;
	struct bufferevent *in, *out;
	struct evdns_getaddrinfo_request *req;
	struct evutil_addrinfo *ai, *cur;
	struct evbuffer *fwd; /* plain HTTP: the rewritten head, sent once connected */
	bool counted;	      /* in its proxy's and the process's open tunnels */
	char host[256], addr[64], why[WHY_MAX];
	unsigned port;
	int rule;      /* the allowing rule, -1 */
	bool literal;  /* the host is an address */
	bool connect;  /* CONNECT: a byte tunnel */
	bool relaying; /* connected, relaying */
	bool allowed;
	bool lingering;	       /* recorded; its reply is going out */
	bool resolving;	       /* inside evdns_getaddrinfo: an answer now is kept for after */
	bool hit;	       /* served from the cache */
	bool intercept;	       /* a CONNECT the proxy may end itself (proxy_tls.c) */
	bool established;      /* ...its 200 went out */
	bool inner;	       /* ...its TLS ended here, the request inside read */
	struct event *peek_ev; /* ...waiting for the client's first byte */
	bool artifact;	       /* the path names a release file (a .tar.gz, a .whl...) */
	char ckey[65];	       /* a cacheable GET: its key (hex), else "" */
	struct fill *fill;
	bool answered; /* ...and it came */
	int sync_code;
	struct evutil_addrinfo *sync_res;
	uint64_t up, down, t0;
	/* relaying: both sockets taken from their bufferevents, each direction
	 * spliced through a pipe (no copy into the worker) */
	struct dir {
		struct tunnel *t;
		int src, dst, pipe[2];
		size_t inpipe; /* bytes read from src, not yet written to dst */
		bool eof;      /* src ended: dst gets a shutdown once the pipe drained */
		struct event *rd, *wr;
		uint64_t *count;
	} d[2];
	bool spliced;
	struct event *idle_ev;
	uint64_t last_ms;
};

/* The proxy's files, top down: proxy.c (the API, a new client, its head),
 * proxy_tls.c (https ended here), proxy_conn.c (resolving, connecting),
 * proxy_relay.c (relaying), proxy_tunnel.c (a tunnel's end),
 * proxy_cache.c (the cache) and proxy_http.c (the HTTP/1 messages). Each
 * calls only those after it; the connecting step reaches the TLS path
 * through the egress's tls ops (set by proxy.c). */

/* proxy_conn.c */
/* Resolve t->host (a literal as itself), then px_try_next. */
void px_resolve(struct tunnel *t);
/* The next address of t->cur on that the rules allow: served from the
 * cache, ended with TLS, or connected (then relayed); none: a 403. */
void px_try_next(struct tunnel *t);
/* The connection to t->cur failed: the next address (px_try_next). */
void px_connect_failed(struct tunnel *t);

/* proxy_relay.c */
/* Connected: the first bytes, then each direction spliced. */
void px_start_relay(struct tunnel *t);
/* The idle timer of a relaying tunnel (the egress's idle_ms). */
void px_idle_start(struct tunnel *t);

/* proxy_tunnel.c */
/* Tunnels open in this process (all jobs), against the descriptor budget. */
extern unsigned px_tunnels_open;
/* End t: its transcript entry (allowed: it relayed or was served; why:
 * said), the client's side flushed, then freed. */
void px_tunnel_end(struct tunnel *t, bool allowed, const char *why);
/* Free t and everything it holds, now. */
void px_tunnel_free(struct tunnel *t);

/* proxy_http.c */
/* 1 when in holds a whole request head, 0 not yet; -1 when it cannot (over
 * HEAD_MAX): the client was sent a 431, the caller ends the tunnel. */
int px_head_complete(struct tunnel *t, struct evbuffer *in);
/* The request line and headers: CONNECT host:port, or METHOD
 * http://host/path (rewritten: px_request). AL_EINVAL with err. */
int px_parse_head(struct tunnel *t, struct evbuffer *in, struct al_err *err);
/* The request line read off in, split: the method (the returned string,
 * the caller's to free), *target and *version inside it. NULL when it is
 * not METHOD SP TARGET SP HTTP/1.x. */
char *px_request_line(struct evbuffer *in, char **target, char **version);
/* A reply to the client before any tunnel exists (text/plain, closes). */
void px_reply(struct tunnel *t, int code, const char *status, const char *why);
/* Write all of buf to a fresh non-blocking socket (a reply or a head:
 * small); false when it would not take it. */
bool px_write_all(int fd, const void *buf, size_t n);
/* The rest of a request head after its request line (method, the origin-form
 * path or NULL for "/", version): t->fwd gets the head as the server sees
 * it (Host with the scheme's default port left out), t->ckey the cache
 * key of a cacheable GET. False when the head is cut short. */
bool px_request(struct tunnel *t, struct evbuffer *in, const char *method, const char *path,
		const char *version, bool https);

/* proxy_cache.c */
bool px_cache_serve(struct tunnel *t);
void px_fill_start(struct tunnel *t);
void px_fill_tee(struct tunnel *t, int src_pipe, size_t n);
void px_fill_add(struct tunnel *t, struct evbuffer *buf, size_t n);
void px_fill_end(struct tunnel *t);
void px_fill_drop(struct tunnel *t);

/* proxy_tls.c: https ended here, reached through e->tls. begin: the
 * address passed: the 200 goes out and the client's first byte says
 * whether it speaks TLS (then the proxy ends it), or not (a byte tunnel as
 * ever); false when it cannot be intercepted (bytes came after the
 * CONNECT before its answer): connect as a byte tunnel. connect: the
 * request is read and not served from the cache: TLS to the address at
 * t->cur; false when that could not start (try the next). free: t's TLS
 * state. */
struct px_tls_ops {
	bool (*begin)(struct tunnel *t);
	bool (*connect)(struct tunnel *t);
	void (*free)(struct tunnel *t);
};
extern const struct px_tls_ops px_tls_ops;

#endif
