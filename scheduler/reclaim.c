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

/* XAUTOCLAIM replies do not name the stream: keep it in the context. */
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

static void on_autoclaim_stream(redisAsyncContext *ac, void *reply, void *priv)
{
	struct autoclaim_ctx *ctx = priv;
	struct sched *s = ctx->s;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    r->element[1]->type != REDIS_REPLY_ARRAY)
		goto out;
	/* its round trip spanned a stall: what it claimed is not a dead
	 * worker's (left with the reclaimer; taken again after the guard if
	 * no worker renews it meanwhile) */
	if (al_mono_ms() - ctx->sent_ms > AL_ACONN_STALL_MS || reclaim_guarded(s)) {
		if (r->element[1]->elements)
			al_log("warn", "reclaim_skipped",
			       "stream=%s entries=%zu note=\"Redis was stalled: idle times count "
			       "the stall; not reclaimed within a lease of it\"",
			       ctx->stream, r->element[1]->elements);
		goto out;
	}
	for (size_t i = 0; i < r->element[1]->elements; i++) {
		redisReply *e = r->element[1]->element[i];
		struct reclaim_ctx *rc;
		struct al_call c;

		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    e->element[1]->type != REDIS_REPLY_ARRAY)
			continue;
		rc = calloc(1, sizeof(*rc));
		if (!rc)
			goto out;
		rc->s = s;
		snprintf(rc->stream, sizeof(rc->stream), "%s", ctx->stream);
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
out:
	free(ctx);
}

/* Entries idle longer than a lease: ready-queue entries of dead or stalled
 * workers, and intake entries of a scheduler that read and went quiet.
 * Not within a lease of (re)connecting: the idle time of every entry counts
 * the outage, and the workers need that long to renew their leases. */
void sc_reclaim(struct sched *s)
{
	char lease[24], consumer[100];

	if (reclaim_guarded(s))
		return;
	snprintf(lease, sizeof(lease), "%llu", (unsigned long long)s->policy.lease_ms);
	snprintf(consumer, sizeof(consumer), "reclaimer-%s", s->id);
	for (size_t i = 0; i < s->policy.ntiers; i++) {
		for (int b = 0; b < AL_BANDS; b++) {
			struct autoclaim_ctx *ctx = calloc(1, sizeof(*ctx));

			if (!ctx)
				return;
			ctx->s = s;
			ctx->sent_ms = al_mono_ms();
			al_key_queue(ctx->stream, s->policy.tiers[i].name, b);
			{
				const char *argv[] = {"XAUTOCLAIM", ctx->stream, AL_GROUP_WORKERS,
						      consumer,	    lease,	 "0-0",
						      "COUNT",	    "100"};

				if (al_aconn_cmd(s->cmd, on_autoclaim_stream, ctx, 8, argv, NULL))
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
