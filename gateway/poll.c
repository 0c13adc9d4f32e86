/* poll.c - long polls: a request's waiter (a Redis connection of its own
 * for XREAD BLOCK, within its tenant's share), and waiting for a job's
 * result in one-second rounds until its deadline. */
#include <errno.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include "../proto/chunk.h"
#include "../proto/json.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "gw.h"
#include "req.h"
#include "../common/clock.h"

#define IDEM_TTL_S     86400
#define IDEM_TTL_STR   "86400"
#define WAIT_STEP_MS   1000
#define JOB_IDS_PREFIX "g" /* ids the gateway chose: g + 32 hex */

static void wait_step(struct req *q);

static struct gw_waiter *waiter_take(struct gw *g)
{
	for (size_t i = 0; i < g->nwaiters; i++)
		if (!g->waiters[i].busy) {
			g->waiters[i].busy = true;
			return &g->waiters[i];
		}
	if (g->nwaiters == GW_WAITERS_MAX)
		return NULL;
	{
		struct gw_waiter *w = &g->waiters[g->nwaiters];

		if (!(w->c = al_aconn_new(g->base, &g->url, "wait", NULL, NULL, w)))
			return NULL;
		w->g = g;
		w->busy = true;
		g->nwaiters++;
		return w;
	}
}

/* The request becomes a long poll: a waiter of its own, within its
 * tenant's share of them, and the long timeout on its connection. False,
 * answered (429: the tenant's share is spent; 503: the pool is), if not. */
bool gw_poll_begin(struct req *q)
{
	if (q->w)
		return true;
	if (q->t->polls >= q->g->polls_per_tenant) {
		gw_reply_error(q, 429,
			       "tenant %s has %u long polls open (waits, runs and output streams), "
			       "its share of this gateway; end one, or poll again later",
			       q->tenant, q->t->polls);
		return false;
	}
	if (!(q->w = waiter_take(q->g))) {
		gw_reply_error(q, 503,
			       "all %d long-poll connections of this gateway are in use; try "
			       "again",
			       GW_WAITERS_MAX);
		return false;
	}
	q->t->polls++;
	if (q->r)
		gw_conn_long(q->r, true, q->g);
	return true;
}

const redisReply *gw_awaited(struct req *q, const redisReply *r)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_STRING)
		return NULL;
	if (r->element[0]->integer == 1)
		return r->element[1];
	snprintf(q->after, sizeof(q->after), "%.*s", (int)r->element[1]->len, r->element[1]->str);
	return NULL;
}

void gw_end_wait_call(struct al_call *c, const struct req *q)
{
	al_end_wait_call(c, gw_answer_name(q), q->after[0] ? q->after : "0-0", WAIT_STEP_MS);
}

static void on_result_got(redisAsyncContext *ac, void *reply, void *priv)
{
	struct req *q = priv;
	const redisReply *res = gw_awaited(q, reply);

	(void)ac;
	if (res) {
		gw_reply_result(q, res->str, res->len);
		return;
	}
	if (!q->r) { /* the client went */
		gw_req_free(q);
		return;
	}
	if (al_mono_ms() >= q->deadline_ms) {
		gw_reply_pending(q, q->code_if_pending);
		return;
	}
	wait_step(q);
}

void gw_await_result(struct req *q)
{
	struct al_call c;

	al_await_call(&c, q->id);
	gw_send(q, q->g->cmd, &c, on_result_got);
}

static void on_end_wait(redisAsyncContext *ac, void *reply, void *priv)
{
	(void)ac;
	(void)reply;
	gw_await_result(priv);
}

/* One round: wait at most a second for anything after the live output's
 * newest entry (the result's end entry comes there), then look again. */
static void wait_step(struct req *q)
{
	struct al_call c;

	if (!gw_poll_begin(q))
		return;
	/* reliable: a new connection sends it once up; an XREAD sent again
	 * after a reset reads the same */
	gw_end_wait_call(&c, q);
	if (al_aconn_call(q->w->c, &c, on_end_wait, q))
		gw_reply_error(q, 500, "out of memory");
	al_call_free(&c);
}

void gw_start_wait(struct req *q, uint64_t ms, int code_if_pending)
{
	q->deadline_ms = al_mono_ms() + (ms > GW_WAIT_MAX_MS ? GW_WAIT_MAX_MS : ms);
	q->code_if_pending = code_if_pending;
	gw_await_result(q);
}
