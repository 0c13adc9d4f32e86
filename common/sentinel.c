/* sentinel.c - finding the master through Redis Sentinel (redis_url.h). */
#include <hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_url.h"

/* A connection with timeout_ms to connect and to answer; NULL with err. */
static redisContext *dial(const char *host, int port, int timeout_ms, struct al_err *err)
{
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	redisContext *rc = redisConnectWithTimeout(host, port, tv);

	if (!rc || rc->err) {
		al_err_set(err, AL_EREDIS, "%s:%d: %s", host, port,
			   rc ? rc->errstr : "out of memory");
		if (rc)
			redisFree(rc);
		return NULL;
	}
	redisSetTimeout(rc, tv);
	return rc;
}

int al_redis_auth(struct redisContext *rc, const char *user, const char *password,
		  struct al_err *err)
{
	redisReply *r;
	int ret = AL_OK;

	if (!password[0])
		return AL_OK;
	r = user[0] ? redisCommand(rc, "AUTH %s %s", user, password)
		    : redisCommand(rc, "AUTH %s", password);
	if (!r || r->type == REDIS_REPLY_ERROR)
		ret = al_err_set(err, AL_EREDIS, "AUTH: %s", r ? r->str : rc->errstr);
	if (r)
		freeReplyObject(r);
	return ret;
}

/* Why reply r (of a command on rc) is not the answer wanted: what. */
static int bad_answer(struct al_err *err, const char *host, int port, const redisContext *rc,
		      const redisReply *r, const char *what)
{
	return al_err_set(err, AL_EREDIS, "%s:%d: %s", host, port,
			  !r				 ? rc->errstr
			  : r->type == REDIS_REPLY_ERROR ? r->str
							 : what);
}

/* What sentinel i says the master is (host, *port); err when it does not. */
static int ask(const struct al_redis_url *u, int i, int timeout_ms, char *host, size_t hcap,
	       int *port, struct al_err *err)
{
	const char *sh = u->sentinels[i].host;
	int sp = u->sentinels[i].port;
	redisContext *rc = dial(sh, sp, timeout_ms, err);
	redisReply *r;
	int rv;

	if (!rc)
		return AL_EREDIS;
	if ((rv = al_redis_auth(rc, u->sentinel_user, u->sentinel_password, err)))
		goto out_conn;
	r = redisCommand(rc, "SENTINEL get-master-addr-by-name %s", u->master);
	rv = AL_EREDIS;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING && strlen(r->element[0]->str) < hcap) {
		snprintf(host, hcap, "%s", r->element[0]->str);
		*port = atoi(r->element[1]->str);
		if (*port > 0 && *port < 65536)
			rv = AL_OK;
	}
	if (rv)
		bad_answer(err, sh, sp, rc, r, "does not know that master");
	if (r)
		freeReplyObject(r);
out_conn:
	redisFree(rc);
	return rv;
}

/* ROLE at host:port says master; err when it does not. */
static int is_master(const struct al_redis_url *u, const char *host, int port, int timeout_ms,
		     struct al_err *err)
{
	redisContext *rc = dial(host, port, timeout_ms, err);
	redisReply *r;
	int rv;

	if (!rc)
		return AL_EREDIS;
	if ((rv = al_redis_auth(rc, u->user, u->password, err))) {
		redisFree(rc);
		return rv;
	}
	r = redisCommand(rc, "ROLE");
	rv = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
		     r->element[0]->type == REDIS_REPLY_STRING &&
		     !strcmp(r->element[0]->str, "master")
		 ? AL_OK
		 : bad_answer(err, host, port, rc, r,
			      "not a master (a replica: a failover is under way)");
	if (r)
		freeReplyObject(r);
	redisFree(rc);
	return rv;
}

int al_sentinel_resolve(struct al_redis_url *u, int timeout_ms, bool *failover, struct al_err *err)
{
	struct al_err why[AL_SENTINELS_MAX] = {0};
	char host[256];
	int port = 0;

	if (failover)
		*failover = false;
	for (int i = 0; i < u->nsentinels; i++) {
		if (ask(u, i, timeout_ms, host, sizeof(host), &port, &why[i]))
			continue;
		if (is_master(u, host, port, timeout_ms, &why[i])) {
			if (failover) /* named, but gone or a replica now: wait for the election */
				*failover = true;
			continue;
		}
		snprintf(u->host, sizeof(u->host), "%s", host);
		u->port = port;
		return AL_OK;
	}
	return al_err_set(err, AL_EREDIS, "no master \"%s\" from %d sentinel%s: %s%s%s", u->master,
			  u->nsentinels, u->nsentinels == 1 ? "" : "s", why[0].msg,
			  u->nsentinels > 1 ? "; " : "", u->nsentinels > 1 ? why[1].msg : "");
}
