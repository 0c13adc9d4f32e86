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

struct al_egress {
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
	struct al_result log;	  /* only its egress list is used */
	uint64_t unlisted;
	char kept[AL_ID_MAX + 1]; /* al_egress_keep: the job's id, each connection logged */
	struct event *keep_ev;	  /* ...and the end of its service */
	char *cache_dir;	  /* al_egress_set_cache, or NULL */
	uint64_t cache_max, hits, hit_bytes, stored;
	bool intercept; /* al_egress_set_intercept: https ended here for the cache */
	char *up_ca;	/* ...and the servers' certificates checked against this too */
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
	struct al_egress *e;
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

/* proxy.c */
/* Whether in holds a whole request head; when it cannot (over HEAD_MAX)
 * the client gets a 431 and the tunnel ends (where: said after the why). */
bool px_head_complete(struct tunnel *t, struct evbuffer *in, const char *where);
/* The request line read off in, split: the method (the returned string,
 * the caller's to free), *target and *version inside it. NULL when it is
 * not METHOD SP TARGET SP HTTP/1.x. */
char *px_request_line(struct evbuffer *in, char **target, char **version);
void px_reply(struct tunnel *t, int code, const char *status, const char *why);
void px_tunnel_end(struct tunnel *t, bool allowed, const char *why);
void px_try_next(struct tunnel *t);
/* The connection to t->cur failed: the next address (px_try_next). */
void px_connect_failed(struct tunnel *t);
bool px_write_all(int fd, const void *buf, size_t n);
void px_idle_start(struct tunnel *t);
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

/* proxy_tls.c */
/* The address passed: the 200 goes out and the client's first byte says
 * whether it speaks TLS (then the proxy ends it: px_tls_*), or not (a
 * byte tunnel as ever). False when it cannot be intercepted (bytes came
 * after the CONNECT before its answer): connect as a byte tunnel. */
bool px_tls_begin(struct tunnel *t);
/* The request is read and not served from the cache: TLS to the address
 * at t->cur. False when that could not start (try the next). */
bool px_tls_connect(struct tunnel *t);
void px_tls_free(struct tunnel *t);

#endif
