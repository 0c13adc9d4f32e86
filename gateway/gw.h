/* gw.h - airlock-gateway: the authenticated HTTP front door (docs/api.md).
 *
 * Stateless like the other daemons: every fact lives in Redis, so any
 * number of gateways can stand behind a load balancer. The tenant of every
 * request is the one its API key belongs to, never anything in the
 * request: the gateway chooses each job's id (random, 128 bits) and
 * writes the key's tenant into the job, and a job whose record names
 * another tenant is 404 to the caller, as an unknown one is. */
#ifndef AL_GW_H
#define AL_GW_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/aconn.h"
#include "../proto/buf.h"
#include "../proto/err.h"
#include "../proto/job.h"

#define GW_KEYS_MAX	1024
#define GW_WAITERS_MAX	512	   /* Redis connections for long polls at once */
#define GW_WAIT_MAX_MS	600000	   /* a wait or run is answered within this */
#define GW_BODY_MAX	(3u << 20) /* default --max-body */
#define GW_RUN_SLACK_MS 30000	   /* /v1/run waits the job's wall_ms plus this */
#define GW_HEADERS_MAX	32768	   /* request line + headers, bytes: else 431 */
#define GW_LINE_MAX	8192	   /* the request line, bytes: else 414 */
#define GW_HEADER_S	10	   /* default --header-timeout-s: a request's headers in */
#define GW_CONNS_MAX	1024	   /* default --max-connections (fewer if nofile is low) */
#define GW_POLLS_SHARE                                                                             \
	256 /* default --polls-per-tenant: half the pool, so one tenant never holds it all */

/* A tenant of the key file, and what it holds of the gateway now. */
struct gw_tenant {
	char name[AL_ID_MAX + 1];
	unsigned polls; /* long polls (waits, runs, streams) it has open */
};

/* One API key: its tenant and the SHA-256 of the key (never the key). */
struct gw_key {
	struct gw_tenant *tenant;
	unsigned char hash[32];
};

struct gw_stats {
	uint64_t requests, bytes_in, bytes_out;
	uint64_t by_code[6]; /* 1xx..5xx, index code / 100 */
	uint64_t submitted, unauthorized;
	uint64_t idem_conflicts; /* 409s: an idempotency key reused with another body */
};

struct gw;
struct gw_conn;
struct evconnlistener;

/* A connection for long polls (XREAD BLOCK blocks it): taken for one wait. */
struct gw_waiter {
	struct gw *g;
	struct al_aconn *c;
	bool busy;
};

struct gw {
	struct event_base *base;
	struct evhttp *http;
	struct al_aconn *cmd; /* scripts and plain reads */
	struct al_redis_url url;
	struct gw_key keys[GW_KEYS_MAX];
	size_t nkeys;
	struct gw_tenant tenants[GW_KEYS_MAX];
	size_t ntenants;
	size_t max_body;
	unsigned polls_per_tenant; /* a tenant's share of waiters */
	unsigned header_s;	   /* seconds for a request's line and headers */
	unsigned max_conns;	   /* connections at once; more wait in the backlog */
	unsigned nconns;
	struct evconnlistener *listener; /* paused while nconns == max_conns */
	struct gw_conn *conns;		 /* every open connection (conn.c) */
	void *tls;			 /* the SSL_CTX of HTTPS, or NULL */
	struct gw_waiter waiters[GW_WAITERS_MAX];
	size_t nwaiters;
	struct gw_stats st;
};

/* keys.c: the operator's key file, lines "TENANT sha256:HEX" ('#' comments);
 * the tenant "default" (the one of jobs that name none: the CLI's) is
 * reserved and refused. Read whole before anything changes: a file that
 * does not load leaves the keys as they were (SIGHUP reloads it). */
int gw_keys_load(struct gw *g, const char *path, struct al_err *err);
/* The tenant of the request's "Authorization: Bearer KEY", or NULL. Every
 * entry is compared, in constant time each. */
struct gw_tenant *gw_auth(struct gw *g, const char *authorization);
/* "sha256:HEX" of key into out (72 bytes). */
void gw_hash_text(const char *key, size_t len, char out[72]);

/* body.c: a job from the request body (JSON or msgpack), with the id and
 * tenant the gateway gives it: the msgpack to submit into out and the
 * decoded job into job (al_job_free it). AL_EINVAL with err naming the
 * field. */
int gw_job_from_body(const char *body, size_t len, bool msgpack, const char *id, const char *tenant,
		     bool opens_session, struct al_buf *out, struct al_job *job,
		     struct al_err *err);
/* The same for a session's call (proto/call.h): its session's id, and
 * its op (NULL: the body's), from the path; the body may name the call's
 * id (then id becomes it: the caller fetches its answer by it). */
struct al_sess_call;
int gw_call_from_body(const char *body, size_t len, bool msgpack, char id[AL_ID_MAX + 1],
		      const char *session, const char *op, const char *tenant, struct al_buf *out,
		      struct al_sess_call *call, struct al_err *err);

/* conn.c: every connection goes through a filter that holds a request's
 * bytes until its headers are whole (so that libevent never buffers more
 * than GW_HEADERS_MAX of them, and the header timeout runs from the
 * request's first byte, not its last), answers 414/431 itself, and counts
 * connections: at max_conns the listener pauses (new ones wait in the
 * kernel's backlog, costing the gateway no descriptor). */
void gw_conns_init(struct gw *g); /* after g->listener and g->http are set */
/* The status (414, 431; 413 a body over max_body, 501 an unknown method)
 * that the request was refused with, and why (err->msg), or 0; and the next
 * request on its connection is one to hold again. */
int gw_conn_request(struct gw *g, struct evhttp_request *r, struct al_err *err);
/* A long poll: the connection's timeout from the header timeout to the
 * longest wait (long = true), and back (false). */
void gw_conn_long(struct evhttp_request *r, bool long_poll, const struct gw *g);

/* api.c: the request handler (evhttp's generic callback). */
void gw_on_request(struct evhttp_request *req, void *arg);

#endif
