/* sentinel.c - finding the master through Redis Sentinel (redis_url.h). */
#include <hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_url.h"

/* A connection with timeout_ms to connect and to answer; NULL with why. */
static redisContext *dial(const char *host, int port, int timeout_ms, char *why, size_t cap)
{
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	redisContext *rc = redisConnectWithTimeout(host, port, tv);

	if (!rc || rc->err) {
		snprintf(why, cap, "%s:%d: %s", host, port, rc ? rc->errstr : "out of memory");
		if (rc)
			redisFree(rc);
		return NULL;
	}
	redisSetTimeout(rc, tv);
	return rc;
}

bool al_redis_auth(struct redisContext *rc, const char *user, const char *password, char *why,
		   size_t cap)
{
	redisReply *r;
	bool ok;

	if (!password[0])
		return true;
	r = user[0] ? redisCommand(rc, "AUTH %s %s", user, password)
		    : redisCommand(rc, "AUTH %s", password);
	ok = r && r->type != REDIS_REPLY_ERROR;
	if (!ok)
		snprintf(why, cap, "AUTH: %s", r ? r->str : rc->errstr);
	if (r)
		freeReplyObject(r);
	return ok;
}

/* What sentinel i says the master is; false with why. */
static bool ask(const struct al_redis_url *u, int i, int timeout_ms, char *host, size_t hcap,
		int *port, char *why, size_t cap)
{
	redisContext *rc = dial(u->sentinels[i].host, u->sentinels[i].port, timeout_ms, why, cap);
	redisReply *r;
	bool ok = false;

	if (!rc)
		return false;
	if (!al_redis_auth(rc, u->sentinel_user, u->sentinel_password, why, cap))
		goto out;
	r = redisCommand(rc, "SENTINEL get-master-addr-by-name %s", u->master);
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING && strlen(r->element[0]->str) < hcap) {
		snprintf(host, hcap, "%s", r->element[0]->str);
		*port = atoi(r->element[1]->str);
		ok = *port > 0 && *port < 65536;
	}
	if (!ok)
		snprintf(why, cap, "%s:%d: %s", u->sentinels[i].host, u->sentinels[i].port,
			 !r				? rc->errstr
			 : r->type == REDIS_REPLY_ERROR ? r->str
							: "does not know that master");
	if (r)
		freeReplyObject(r);
out:
	redisFree(rc);
	return ok;
}

/* ROLE at host:port says master; false with why. */
static bool is_master(const struct al_redis_url *u, const char *host, int port, int timeout_ms,
		      char *why, size_t cap)
{
	redisContext *rc = dial(host, port, timeout_ms, why, cap);
	redisReply *r;
	bool ok;

	if (!rc)
		return false;
	if (!al_redis_auth(rc, u->user, u->password, why, cap)) {
		redisFree(rc);
		return false;
	}
	r = redisCommand(rc, "ROLE");
	ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
	     r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
	if (!ok)
		snprintf(why, cap, "%s:%d: %s", host, port,
			 !r				? rc->errstr
			 : r->type == REDIS_REPLY_ERROR ? r->str
							: "not a master (a replica: a failover is "
							  "under way)");
	if (r)
		freeReplyObject(r);
	redisFree(rc);
	return ok;
}

int al_sentinel_resolve(struct al_redis_url *u, int timeout_ms, bool *failover, struct al_err *err)
{
	char why[AL_SENTINELS_MAX][400], host[256];
	int port = 0;

	if (failover)
		*failover = false;
	for (int i = 0; i < u->nsentinels; i++) {
		if (!ask(u, i, timeout_ms, host, sizeof(host), &port, why[i], sizeof(why[i])))
			continue;
		if (!is_master(u, host, port, timeout_ms, why[i], sizeof(why[i]))) {
			if (failover) /* named, but gone or a replica now: wait for the election */
				*failover = true;
			continue;
		}
		snprintf(u->host, sizeof(u->host), "%s", host);
		u->port = port;
		return AL_OK;
	}
	return al_err_set(err, AL_EREDIS, "no master \"%s\" from %d sentinel%s: %s%s%s", u->master,
			  u->nsentinels, u->nsentinels == 1 ? "" : "s", why[0],
			  u->nsentinels > 1 ? "; " : "", u->nsentinels > 1 ? why[1] : "");
}
