/* aconn.h - an asynchronous Redis connection on a libevent loop (hiredis
 * async + its libevent adapter) that authenticates, and reconnects with
 * capped exponential backoff whenever it drops. Used by the worker and the
 * scheduler. It loads the Airlock scripts on every connect, so callers use
 * EVALSHA; a context is never reused after an error (hiredis' rule): a new
 * one is made on every reconnect. */
#ifndef AL_ACONN_H
#define AL_ACONN_H

#include <event2/event.h>
#include <hiredis.h>
#include <async.h>
#include <stdbool.h>

#include "redis_url.h"

struct al_aconn;

/* up: called each time the connection is (re)established and authenticated;
 * down: each time it is lost (pending callbacks get a NULL reply first). */
typedef void (*al_aconn_fn)(struct al_aconn *c, void *arg);

struct al_aconn *al_aconn_new(struct event_base *base, const struct al_redis_url *url,
			      const char *name, al_aconn_fn up, al_aconn_fn down, void *arg);
/* Send a command when up; returns -1 (and the callback is not called) when
 * the connection is down. */
int al_aconn_cmd(struct al_aconn *c, redisCallbackFn *fn, void *priv, int argc,
		 const char *const *argv, const size_t *lens);
bool al_aconn_is_up(const struct al_aconn *c);
/* SCRIPT LOAD every Airlock script (done at each connect; call again after a
 * NOSCRIPT error, e.g. when an operator ran SCRIPT FLUSH). */
void al_aconn_load_scripts(struct al_aconn *c);
void al_aconn_free(struct al_aconn *c);

#endif
