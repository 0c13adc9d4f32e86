/* client_int.h - what the C client's files share: the connection (client.c)
 * and the operator's calls over it (admin.c, which calls down to it). Not
 * installed. */
#ifndef AL_CLIENT_INT_H
#define AL_CLIENT_INT_H

#include <hiredis.h>
#include <stdbool.h>

#include "../common/redis_url.h"
#include "../proto/contract.h"
#include "gateway.h"

struct al_client {
	redisContext *rc;
	struct al_gw *gw; /* gateway mode instead (al_client_connect_gateway) */
	char where[300];
	struct al_redis_url url;
	bool retried;  /* the last command was sent again on a new connection */
	bool no_xread; /* the user may not XREAD: waits poll (end_wait) */
};

/* call's reply, sent once (a new connection after a failover sends it
 * again only when it is safe to); NULL with err (may be NULL). */
redisReply *al_client_run_once(struct al_client *c, struct al_err *err, struct al_call *call);

#endif
