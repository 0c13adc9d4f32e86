/* aconn.h - the daemons' one Redis connection layer: an asynchronous
 * connection on a libevent loop (hiredis async + its libevent adapter) that
 * treats every way Redis can fail the same everywhere.
 *
 * - Up means ready: connected, AUTH and SELECT answered OK, every Airlock
 *   script loaded (SCRIPT LOAD answered with its SHA1). A Redis that is still
 *   loading its data (LOADING) is not up; the handshake is tried again with
 *   capped exponential backoff until it succeeds.
 * - A reply LOADING, BUSY, NOSCRIPT, READONLY, MASTERDOWN, TRYAGAIN, OOM or
 *   CLUSTERDOWN resets the connection (nothing more is sent on it; it is made
 *   anew with the handshake, which reloads the scripts).
 * - No reply for timeout_ms (a stopped or unreachable Redis: the connection
 *   pings it while up) also resets it.
 * - al_aconn_call (reliable): the call is kept, sent when up, and sent again
 *   after every reset or disconnect until Redis gives a definite answer; only
 *   that answer reaches the callback. The scripts are written so that a call
 *   sent twice (its first answer lost with the connection) does no harm.
 * - al_aconn_cmd (best effort): sent only when up; the callback gets the reply
 *   as it came, or NULL when the connection was lost first.
 * A hiredis context is never reused after an error (hiredis' rule). */
#ifndef AL_ACONN_H
#define AL_ACONN_H

#include <event2/event.h>
#include <hiredis.h>
#include <async.h>
#include <stdbool.h>
#include <stdint.h>

#include "../proto/contract.h"
#include "redis_url.h"

struct al_aconn;

/* up: called each time the connection is (re)established and ready;
 * down: each time it is lost (best-effort callbacks got a NULL reply first). */
typedef void (*al_aconn_fn)(struct al_aconn *c, void *arg);

#define AL_ACONN_TIMEOUT_MS 10000 /* default: no answer this long resets */
#define AL_ACONN_STALL_MS   1000  /* an answer this late: Redis was stalled */

struct al_aconn *al_aconn_new(struct event_base *base, const struct al_redis_url *url,
			      const char *name, al_aconn_fn up, al_aconn_fn down, void *arg);

/* Reliable: takes call over (it is emptied; freed by the connection). fn
 * (may be NULL) gets the definite reply, or NULL once, when the connection
 * is freed before Redis answered. Returns -1 only when call could not be
 * built (out of memory; fn is not called). */
int al_aconn_call(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv);
/* Best effort: send call now (it stays the caller's). AL_EREDIS when down. */
int al_aconn_send(struct al_aconn *c, struct al_call *call, redisCallbackFn *fn, void *priv);
/* Best effort, from a plain argv (lens NULL: strings). AL_EREDIS when down. */
int al_aconn_cmd(struct al_aconn *c, redisCallbackFn *fn, void *priv, int argc,
		 const char *const *argv, const size_t *lens);
/* SUBSCRIBE: fn is called for every message, with priv (no timeout, no
 * reset on its replies). -1 when down. */
int al_aconn_subscribe(struct al_aconn *c, const char *channel, redisCallbackFn *fn, void *priv);

/* Why the connection's last refused call (a -1 above) was refused: not
 * connected, closing, out of memory, or hiredis's own reason. */
const char *al_aconn_strerror(const struct al_aconn *c);

bool al_aconn_is_up(const struct al_aconn *c);
/* Monotonic ms when an answer last came more than AL_ACONN_STALL_MS after
 * its call (Redis stopped, swapping, a long fork...: a silence shorter than
 * the reset timeout), 0 if never. Whatever measures idle time in Redis
 * counted that silence too. */
uint64_t al_aconn_stall_end_ms(const struct al_aconn *c);
/* Reliable calls not answered yet. */
unsigned al_aconn_pending(const struct al_aconn *c);
/* The error kind of a reply: true for the ones that reset a connection. */
bool al_aconn_transient(const redisReply *r);
/* Free the connection: reliable calls not answered get NULL, once. */
void al_aconn_free(struct al_aconn *c);

#endif
