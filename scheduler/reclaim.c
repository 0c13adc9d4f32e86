/* reclaim.c - reclaim, retries, deadlines (see sched.h): the jobs of dead
 * workers back to their queues after a lease, due retries promoted, jobs
 * past their deadline expired. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../common/aconn.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "../common/policy.h"
#include "sched.h"
#include "vmlease.h"
#include "../common/clock.h"

/* ---- reclaim, retries, deadlines ---- */

struct reclaim_ctx {
	struct sched *s;
	char stream[AL_KEY_MAX];
	char entry[64];
	char id[AL_ID_MAX + 1];
	char attempt[16];
};

static void on_reclaim_one(redisAsyncContext *ac, void *reply, void *priv)
{
	struct reclaim_ctx *rc = priv;
	struct sched *s = rc->s;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_INTEGER) {
		if (r->integer == AL_RECLAIM_REQUEUED) {
			s->reclaimed++;
			al_log("info", "reclaimed",
			       "job=%s attempt=%s stream=%s note=\"lease expired; re-queued\"",
			       rc->id, rc->attempt, rc->stream);
		} else if (r->integer == AL_RECLAIM_EXHAUSTED) {
			char msg[200];

			s->lost++;
			snprintf(msg, sizeof(msg),
				 "every attempt's worker died or went silent (%s attempts)",
				 rc->attempt);
			al_log("warn", "worker_lost", "job=%s attempts=%s", rc->id, rc->attempt);
			sc_commit(s, rc->id, atol(rc->attempt), AL_ST_WORKER_LOST, msg, NULL,
				  rc->stream, rc->entry, AL_GROUP_WORKERS, NULL, 0);
			sc_dead_letter(s, rc->stream, rc->entry, msg, rc->id, NULL, 0);
		}
	} else if (r && r->type == REDIS_REPLY_ERROR) {
		al_log("error", "reclaim", "job=%s error=\"%s\"", rc->id, r->str);
	}
	free(rc);
}

/* Replies do not name the stream: keep it in the context. */
struct autoclaim_ctx {
	struct sched *s;
	char stream[AL_KEY_MAX];
	uint64_t sent_ms; /* monotonic */
};

/* Redis was silent lately (a stall shorter than a reset, or a reconnect):
 * the idle times it reports count that silence, and the workers need a
 * lease to renew theirs. Nothing is reclaimed within a lease of it. */
static bool reclaim_guarded(const struct sched *s)
{
	uint64_t now = al_mono_ms(), stall = al_aconn_stall_end_ms(s->cmd);

	return now - s->up_ms < s->policy.lease_ms || (stall && now - stall < s->policy.lease_ms);
}

/* Its round trip spanned a stall, or the guard is on: not acted on. */
static bool reply_stale(const struct autoclaim_ctx *ctx, size_t n)
{
	if (al_mono_ms() - ctx->sent_ms <= AL_ACONN_STALL_MS && !reclaim_guarded(ctx->s))
		return false;
	if (n)
		al_log("warn", "reclaim_skipped",
		       "stream=%s entries=%zu note=\"Redis was stalled: not reclaimed within a "
		       "lease of it\"",
		       ctx->stream, n);
	return true;
}

/* Entries (id, fields) of a dead worker taken by the reclaimer: each back
 * to its queue (or worker_lost) by the RECLAIM script. */
static void reclaim_entries(struct sched *s, const char *stream, const redisReply *entries)
{
	for (size_t i = 0; i < entries->elements; i++) {
		redisReply *e = entries->element[i];
		struct reclaim_ctx *rc;
		struct al_call c;

		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    e->element[1]->type != REDIS_REPLY_ARRAY)
			continue;
		rc = calloc(1, sizeof(*rc));
		if (!rc)
			return;
		rc->s = s;
		snprintf(rc->stream, sizeof(rc->stream), "%s", stream);
		snprintf(rc->entry, sizeof(rc->entry), "%s", e->element[0]->str);
		for (size_t k = 0; k + 1 < e->element[1]->elements; k += 2) {
			const char *key = e->element[1]->element[k]->str;
			const char *val = e->element[1]->element[k + 1]->str;

			if (key && val && !strcmp(key, "id") && al_job_id_ok(val, strlen(val)))
				snprintf(rc->id, sizeof(rc->id), "%s", val);
			else if (key && val && !strcmp(key, "attempt"))
				snprintf(rc->attempt, sizeof(rc->attempt), "%s", val);
		}
		if (!rc->id[0] || !rc->attempt[0]) {
			/* a malformed entry in a ready queue: dead-letter it */
			sc_dead_letter(s, rc->stream, rc->entry,
				       "malformed queue entry: needs id and attempt", NULL, NULL,
				       0);
			al_xack_call(&c, rc->stream, AL_GROUP_WORKERS, rc->entry);
			sc_call(s, &c, "xack");
			free(rc);
			continue;
		}
		al_reclaim_call(&c, rc->id, rc->stream, rc->entry, AL_GROUP_WORKERS, rc->attempt);
		if (al_aconn_call(s->cmd, &c, on_reclaim_one, rc))
			free(rc);
	}
}

static void on_claimed(redisAsyncContext *ac, void *reply, void *priv)
{
	struct autoclaim_ctx *ctx = priv;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY && !reply_stale(ctx, r->elements))
		reclaim_entries(ctx->s, ctx->stream, r);
	free(ctx);
}

/* ---- workers' liveness ---- */

static struct sc_beat *beat_of(struct sched *s, const char *worker, bool make)
{
	for (size_t i = 0; i < s->nbeats; i++)
		if (!strcmp(s->beats[i].worker, worker))
			return &s->beats[i];
	if (!make || strlen(worker) > AL_ID_MAX)
		return NULL;
	if (s->nbeats == s->capbeats) {
		size_t cap = s->capbeats ? 2 * s->capbeats : 16;
		struct sc_beat *nb = realloc(s->beats, cap * sizeof(*nb));

		if (!nb)
			return NULL;
		s->beats = nb;
		s->capbeats = cap;
	}
	memset(&s->beats[s->nbeats], 0, sizeof(s->beats[0]));
	snprintf(s->beats[s->nbeats].worker, sizeof(s->beats[0].worker), "%s", worker);
	s->beats[s->nbeats].changed_ms = al_mono_ms(); /* alive until seen still a lease */
	return &s->beats[s->nbeats++];
}

/* al:workers: each worker's heartbeat counter; a counter that moved is a
 * worker alive now, by this scheduler's monotonic clock. */
static void on_workers(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i < s->nbeats; i++)
		s->beats[i].seen = false;
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const char *desc = r->element[i + 1]->str, *b;
		struct sc_beat *w;
		uint64_t n;

		if (r->element[i]->type != REDIS_REPLY_STRING || !desc ||
		    !(b = strstr(desc, "\"beat\":")))
			continue; /* a worker that counts no beats: judged by idle time */
		n = strtoull(b + 7, NULL, 10);
		if (!(w = beat_of(s, r->element[i]->str, true)))
			continue;
		w->seen = true;
		if (n != w->beat) {
			w->beat = n;
			w->changed_ms = al_mono_ms();
		}
	}
	/* a worker that left al:workers (it said goodbye, or was removed) is
	 * judged by idle time, as one that counts no beats: its entry goes */
	for (size_t i = 0; i < s->nbeats;)
		if (s->beats[i].seen)
			i++;
		else
			s->beats[i] = s->beats[--s->nbeats];
}

/* An entry that goes back: its worker's beat has not moved for a lease
 * (whatever Redis's clock says), or the entry has been idle a lease (its
 * worker, alive, no longer renews it: a claim whose answer was lost) while
 * Redis's clock has not jumped within two leases (a jump makes every idle
 * time wrong). */
static bool entry_lost(struct sched *s, const char *consumer, long long idle_ms)
{
	const struct sc_beat *w = beat_of(s, consumer, false);
	bool idle = idle_ms >= 0 && (uint64_t)idle_ms >= s->policy.lease_ms;

	if (w && al_mono_ms() - w->changed_ms >= s->policy.lease_ms)
		return true;
	if (s->redis_step_mono && al_mono_ms() - s->redis_step_mono < 2 * s->policy.lease_ms)
		return false;
	return idle;
}

/* XPENDING's entries (id, consumer, idle, deliveries): those of dead
 * owners are claimed by the reclaimer (min-idle 0: whatever Redis's clock
 * says) and then reclaimed. */
static void on_pending(redisAsyncContext *ac, void *reply, void *priv)
{
	struct autoclaim_ctx *ctx = priv;
	struct sched *s = ctx->s;
	redisReply *r = reply;
	struct al_call c;
	char consumer[100];
	int n = 0;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || reply_stale(ctx, 0)) {
		free(ctx);
		return;
	}
	snprintf(consumer, sizeof(consumer), "reclaimer-%s", s->id);
	al_call_init(&c, NULL);
	al_call_str(&c, "XCLAIM");
	al_call_str(&c, ctx->stream);
	al_call_str(&c, AL_GROUP_WORKERS);
	al_call_str(&c, consumer);
	al_call_str(&c, "0");
	for (size_t i = 0; i < r->elements; i++) {
		redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_ARRAY || e->elements != 4 ||
		    e->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[1]->type != REDIS_REPLY_STRING ||
		    e->element[2]->type != REDIS_REPLY_INTEGER)
			continue;
		if (!entry_lost(s, e->element[1]->str, e->element[2]->integer))
			continue;
		al_call_str(&c, e->element[0]->str);
		n++;
	}
	ctx->sent_ms = al_mono_ms();
	if (!n || al_aconn_call(s->cmd, &c, on_claimed, ctx))
		free(ctx);
	al_call_free(&c);
}

/* The jobs of dead workers back to their queues, and intake entries of a
 * scheduler that read and went quiet. A worker is dead when its heartbeat
 * counter has not moved for a lease, by this scheduler's monotonic clock
 * (a step of Redis's clock changes nothing); not within a lease of
 * (re)connecting or of a Redis stall: the workers need that long to be
 * seen beating. */
void sc_reclaim(struct sched *s)
{
	char lease[24];
	struct al_call workers;

	/* Redis's clock, then the beats, before any pending list: the replies
	 * come in order, so a jump or a beat is known when they are judged */
	sc_read_time(s);
	al_hash_all_call(&workers, AL_KEY_WORKERS);
	al_aconn_send(s->cmd, &workers, on_workers, s);
	al_call_free(&workers);
	if (reclaim_guarded(s))
		return;
	/* sessions whose worker stopped renewing them: ended, worker_lost. Their
	 * leases are on Redis's clock (the scripts' TIME), and so is this now;
	 * within two leases of a step of that clock, none is judged (a lease
	 * written before it reads a minute off) */
	if (!s->redis_step_mono || al_mono_ms() - s->redis_step_mono >= 2 * s->policy.lease_ms) {
		al_session_lost_call(&workers, sc_now_ms(s), s->policy.result_ttl_ms);
		al_aconn_send(s->cmd, &workers, sc_on_reply_log, (void *)"session_lost");
		al_call_free(&workers);
		/* paused past their time, and no worker of their resume queue
		 * ended them (it looks every AL_PAUSED_DUE_EVERY_MS): it is gone.
		 * Their files stay where they are, swept by a worker that starts
		 * there (docs/snapshots.md) */
		al_paused_expire_call(&workers, 2 * s->policy.lease_ms + AL_PAUSED_DUE_EVERY_MS,
				      s->policy.result_ttl_ms);
		al_aconn_send(s->cmd, &workers, sc_on_reply_log, (void *)"paused_expire");
		al_call_free(&workers);
	}
	snprintf(lease, sizeof(lease), "%llu", (unsigned long long)s->policy.lease_ms);
	for (size_t i = 0; i < s->policy.ntiers; i++) {
		for (int b = 0; b < AL_BANDS; b++) {
			struct autoclaim_ctx *ctx = calloc(1, sizeof(*ctx));

			if (!ctx)
				return;
			ctx->s = s;
			ctx->sent_ms = al_mono_ms();
			al_key_queue(ctx->stream, s->policy.tiers[i].name, b);
			{
				const char *argv[] = {"XPENDING", ctx->stream, AL_GROUP_WORKERS,
						      "-",	  "+",	       "1000"};

				if (al_aconn_cmd(s->cmd, on_pending, ctx, 6, argv, NULL))
					free(ctx);
			}
		}
	}
	{
		const char *argv[] = {"XAUTOCLAIM", AL_KEY_INTAKE, AL_GROUP_SCHEDULER, s->id, lease,
				      "0-0",	    "COUNT",	   INTAKE_BATCH};

		al_aconn_cmd(s->cmd, sc_on_intake_claimed, s, 8, argv, NULL);
	}
}

void sc_on_due_deadlines(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i < r->elements; i++) {
		const char *id = r->element[i]->str;
		struct al_result res = {0};
		struct al_buf b = {0};
		struct al_call c;

		if (r->element[i]->type != REDIS_REPLY_STRING ||
		    !al_job_id_ok(id, r->element[i]->len))
			continue;
		res.version = AL_PROTO_VERSION;
		res.id = (char *)id;
		res.status = AL_ST_EXPIRED;
		res.error = (char *)"not started before its deadline";
		res.finished_ms = al_now_ms();
		if (al_result_encode(&res, &b, NULL))
			continue;
		al_expire_call(&c, id, b.data, b.len, s->policy.result_ttl_ms);
		al_aconn_send(s->cmd, &c, sc_on_reply_log, (void *)"expire");
		al_call_free(&c);
		al_buf_free(&b);
	}
}
