/* redis_url.h - parsing Redis addresses: redis://[user:password@]host[:port][/db]
 * or unix:///path/to.sock[?user=U&password=P&db=N], or a bare /path. */
#ifndef AL_REDIS_URL_H
#define AL_REDIS_URL_H

#include <stddef.h>

#include "../proto/err.h"

struct al_redis_url {
	char host[256];	    /* TCP host, empty for a unix socket */
	int port;	    /* TCP port, default 6379 */
	char path[256];	    /* unix socket path, empty for TCP */
	char user[128];	    /* ACL user, empty for "default" */
	char password[256]; /* empty for none */
	int db;		    /* SELECT db, default 0 */
};

int al_redis_url_parse(const char *url, struct al_redis_url *u, struct al_err *err);
/* "host:port" or the socket path, for messages (no password). */
const char *al_redis_url_where(const struct al_redis_url *u, char *buf, size_t cap);

#endif
