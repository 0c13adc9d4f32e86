/* redis_url.h - parsing Redis addresses: redis://[user:password@]host[:port][/db]
 * or unix:///path/to.sock[?user=U&password=P&db=N], or a bare /path; or,
 * through Redis Sentinel, redis+sentinel://[user:password@]h1[:p1],h2[:p2]/master[/db]
 * [?sentinel_user=U&sentinel_password=P] (the credentials are the master's;
 * sentinel_* the sentinels' own, when they need any). Every form also takes
 * ?min_replicas=N&replica_timeout_ms=MS (see below). */
#ifndef AL_REDIS_URL_H
#define AL_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "../proto/err.h"

#define AL_SENTINELS_MAX 8

struct al_redis_url {
	char host[256];	    /* TCP host, empty for a unix socket */
	int port;	    /* TCP port, default 6379 */
	char path[256];	    /* unix socket path, empty for TCP */
	char user[128];	    /* ACL user, empty for "default" */
	char password[256]; /* empty for none */
	int db;		    /* SELECT db, default 0 */
	/* Sentinel: ask these for master's address (host and port above are
	 * then the last answer) */
	int nsentinels;
	struct {
		char host[256];
		int port; /* default 26379 */
	} sentinels[AL_SENTINELS_MAX];
	char master[128];	     /* the master's name the sentinels know */
	char sentinel_user[128];     /* the sentinels' ACL user, empty for default */
	char sentinel_password[256]; /* empty for none */
	/* durability (?min_replicas=N&replica_timeout_ms=MS, any form): a
	 * submission, and a worker's result commit, count as done only once N
	 * replicas have it (WAIT), or fail after MS (default 1000) */
	int min_replicas;
	int replica_timeout_ms;
};

int al_redis_url_parse(const char *url, struct al_redis_url *u, struct al_err *err);
/* Sentinel: ask u's sentinels, in turn, for its master's address, and
 * check with ROLE that the address is a master now (a sentinel answering
 * in the middle of a failover may name the old one); host/port of u get
 * it. Each sentinel and the master get timeout_ms to answer. AL_EREDIS
 * naming what each said when none gave a master; then *failover (may be
 * NULL) tells whether one named a master that is gone or a replica now (a
 * failover under way: worth waiting for) rather than none knowing it. */
int al_sentinel_resolve(struct al_redis_url *u, int timeout_ms, bool *failover, struct al_err *err);

/* AUTH on a fresh synchronous connection, when there are credentials
 * (user may be empty: the default user); AL_EREDIS saying why. */
struct redisContext;
int al_redis_auth(struct redisContext *rc, const char *user, const char *password,
		  struct al_err *err);

/* "host:port" or the socket path, for messages (no password). */
const char *al_redis_url_where(const struct al_redis_url *u, char *buf, size_t cap);

#endif
