/* main.c - airlock-scheduler: admission of submitted jobs against the
 * operator's policy, routing to per-tier ready queues by priority, retries
 * after their backoff, reclaiming the jobs of dead workers, deadlines, and
 * metrics over HTTP. Several schedulers may run at once: every step is a
 * consumer-group read or an atomic script, so none is done twice. */
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
#include "vmlease.h"

#define INTAKE_BATCH "256"
#define TICK_MS 100

struct sched {
	struct event_base *base;
	struct al_policy policy;
	const char *policy_path;
	struct al_redis_url url;
	struct al_aconn *cmd, *fetch;
	char id[80];
	bool fetching;
	bool stopping;
	struct event *tick, *sighup, *sigterm, *sigint;
	struct evhttp *http;
	uint64_t last_reclaim_ms, last_snapshot_ms, last_vm_ms;
	const char *libvirt_uri;   /* service VMs' libvirt, or NULL */
	struct al_vmlease *vms;
	bool reconciled;
	uint64_t up_ms;		   /* monotonic ms when the command connection was last up */
	bool read_own;		   /* this run's own pending intake entries were read */
	/* metrics snapshot, refreshed once a second */
	char *metrics;
	bool redis_ok;
	uint64_t admitted, rejected, reclaimed, lost, expired;
};

static void maybe_fetch(struct sched *s);

/* Fire-and-log reply of a best-effort call (promote, expire, trim: each
 * is repeated by the next pass anyway). */
static void on_reply_log(redisAsyncContext *ac, void *reply, void *priv)
{
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ERROR)
		al_log("error", "redis", "what=%s error=\"%s\"", (const char *)priv, r->str);
}

/* A reliable call whose answer only needs logging when it is an error. */
static void call(struct sched *s, struct al_call *c, const char *what)
{
	if (al_aconn_call(s->cmd, c, on_reply_log, (void *)what))
		al_log("error", "out_of_memory", "what=%s", what);
}

static void ack_intake(struct sched *s, const char *entry)
{
	struct al_call c;

	al_xack_call(&c, AL_KEY_INTAKE, AL_GROUP_SCHEDULER, entry);
	call(s, &c, "xack");
}

static void dead_letter(struct sched *s, const char *source, const char *entry, const char *reason,
			const char *id, const char *raw, size_t rawlen)
{
	struct al_call c;

	al_dlq_call(&c, s->policy.dlq_max_len, reason, source, entry, id, raw, rawlen);
	al_log("warn", "dead_letter", "source=%s entry=%s job=%s reason=\"%s\"", source, entry,
	       id ? id : "-", reason);
	call(s, &c, "dlq");
}

/* A result the scheduler decides (rejected, worker_lost), kept until Redis
 * answers. An unrun result of an intake entry whose id another submission
 * holds is refused by COMMIT (-2): that entry is dead-lettered instead. */
struct commit_ctx {
	struct sched *s;
	char id[AL_ID_MAX + 1];
	char entry[64];
	char *raw; /* the submission, for that dead letter */
	size_t rawlen;
};

static void on_commit(redisAsyncContext *ac, void *reply, void *priv)
{
	struct commit_ctx *cc = priv;
	redisReply *r = reply, *e = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 ? r->element[0] : r;

	(void)ac;
	if (e && e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_ID_TAKEN) {
		char msg[160];

		snprintf(msg, sizeof(msg), "duplicate job id: %s belongs to another submission; this entry never runs",
			 cc->id);
		dead_letter(cc->s, AL_KEY_INTAKE, cc->entry, msg, cc->id, cc->raw, cc->rawlen);
	} else if (e && e->type == REDIS_REPLY_ERROR) {
		al_log("error", "commit", "job=%s error=\"%s\"", cc->id, e->str);
	}
	free(cc->raw);
	free(cc);
}

static void commit(struct sched *s, const char *id, long attempt, enum al_status_code st,
		   const char *msg, const char *stream, const char *entry, const char *group,
		   const char *raw, size_t rawlen)
{
	struct al_result res = { 0 };
	struct al_buf b = { 0 };
	struct al_call c;
	struct commit_ctx *cc = calloc(1, sizeof(*cc));

	res.version = AL_PROTO_VERSION;
	res.id = (char *)id;
	res.attempt = attempt > 0 ? (uint32_t)attempt : 0; /* worker_lost: the last attempt */
	res.status = st;
	res.error = (char *)msg;
	res.finished_ms = al_now_ms();
	if (!cc || al_result_encode(&res, &b, NULL)) {
		free(cc);
		al_log("error", "out_of_memory", "job=%s what=commit", id);
		return;
	}
	cc->s = s;
	snprintf(cc->id, sizeof(cc->id), "%s", id);
	snprintf(cc->entry, sizeof(cc->entry), "%s", entry ? entry : "");
	if (raw && (cc->raw = malloc(rawlen ? rawlen : 1))) {
		memcpy(cc->raw, raw, rawlen);
		cc->rawlen = rawlen;
	}
	al_call_init(&c, al_lua_commit);
	al_commit_add(&c, &(struct al_commit_item){ .id = id, .attempt = attempt, .result = b.data,
						   .len = b.len, .ttl_ms = s->policy.result_ttl_ms,
						   .stream = stream, .entry = entry, .group = group,
						   .status = al_status_name(st) });
	al_buf_free(&b);
	if (al_aconn_call(s->cmd, &c, on_commit, cc)) {
		free(cc->raw);
		free(cc);
	}
}

/* ---- admission ---- */

struct admit_item {
	char entry[64];
	char id[AL_ID_MAX + 1];
	char tenant[AL_ID_MAX + 1];
	char *raw; /* the submission, for the dead-letter stream */
	size_t rawlen;
};

/* One ADMIT call for every admissible entry of an intake read. */
struct admit_batch {
	struct sched *s;
	int n;
	struct al_call call;
	struct admit_item items[];
};

static void admit_batch_free(struct admit_batch *b)
{
	for (int i = 0; i < b->n; i++)
		free(b->items[i].raw);
	al_call_free(&b->call);
	free(b);
}

static void on_admit(redisAsyncContext *ac, void *reply, void *priv)
{
	struct admit_batch *b = priv;
	struct sched *s = b->s;
	redisReply *r = reply;
	int queued = 0;

	(void)ac;
	if (!r) /* the scheduler is stopping: the entries stay pending for another */
		goto out;
	if (r->type != REDIS_REPLY_ARRAY || (int)r->elements != b->n) {
		al_log("error", "admit", "jobs=%d error=\"%s\" type=%d elements=%zu note=\"entries stay pending; another scheduler takes them over\"",
		       b->n, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply", r->type,
		       r->elements);
		goto out;
	}
	for (int i = 0; i < b->n; i++) {
		struct admit_item *a = &b->items[i];
		long long code = r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : -9;

		switch (code) {
		case AL_ADMIT_QUEUED:
			s->admitted++;
			queued++;
			break;
		case AL_ADMIT_AGAIN:    /* a repeated ADMIT: it was admitted before */
		case AL_ADMIT_FINISHED: /* cancelled before admission: its result exists */
			break;
		case AL_ADMIT_ID_TAKEN: {
			char msg[160];

			snprintf(msg, sizeof(msg), "duplicate job id: %s belongs to another submission; this entry never runs",
				 a->id);
			dead_letter(s, AL_KEY_INTAKE, a->entry, msg, a->id, a->raw, a->rawlen);
			break;
		}
		case AL_ADMIT_QUEUE_FULL:
		case AL_ADMIT_RATE: {
			char msg[200];

			snprintf(msg, sizeof(msg), "tenant %s: %s", a->tenant,
				 code == AL_ADMIT_QUEUE_FULL ? "queue quota (max_queued) reached"
							     : "submission rate (rate_per_s) exceeded");
			s->rejected++;
			al_log("info", "rejected", "job=%s reason=\"%s\"", a->id, msg);
			commit(s, a->id, -1, AL_ST_REJECTED, msg, AL_KEY_INTAKE, a->entry,
			       AL_GROUP_SCHEDULER, a->raw, a->rawlen);
			break;
		}
		default:
			al_log("error", "admit", "job=%s error=\"unexpected reply\"", a->id);
		}
	}
	if (queued)
		al_log("info", "admitted", "jobs=%d total=%llu", queued, (unsigned long long)s->admitted);
out:
	admit_batch_free(b);
}

/* The `id` field an intake entry may carry beside `job` (clients that XADD
 * by hand are asked to set it), when it is a well-formed id. */
static const char *entry_id_field(redisReply *fields)
{
	if (fields->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t k = 0; k + 1 < fields->elements; k += 2) {
		redisReply *key = fields->element[k], *val = fields->element[k + 1];

		if (key->type == REDIS_REPLY_STRING && val->type == REDIS_REPLY_STRING &&
		    !strcmp(key->str, "id"))
			return al_job_id_ok(val->str, val->len) ? val->str : NULL;
	}
	return NULL;
}

/* A submission that cannot run: a rejected result under the id its client
 * waits on (the job's own, else the entry's id field); a dead letter when
 * there is none, so that the operator sees it. */
static void refuse(struct sched *s, const char *entry, const char *id, const char *why,
		   const char *raw, size_t rawlen)
{
	if (id) {
		s->rejected++;
		al_log("info", "rejected", "job=%s entry=%s reason=\"%s\"", id, entry, why);
		commit(s, id, -1, AL_ST_REJECTED, why, AL_KEY_INTAKE, entry, AL_GROUP_SCHEDULER, raw,
		       rawlen);
	} else {
		dead_letter(s, AL_KEY_INTAKE, entry, why, NULL, raw, rawlen);
		ack_intake(s, entry);
	}
}

/* Check one entry against the policy; admissible ones join the batch. */
static void admit_entry(struct sched *s, struct admit_batch *batch, const char *entry,
			const char *raw, size_t rawlen, const char *field_id)
{
	struct al_job job;
	struct al_err err = { 0 };
	struct admit_item *a;
	struct al_buf enc = { 0 };
	const struct al_tenant_policy *tp;
	uint64_t t = al_now_ms();

	if (al_job_decode(raw, rawlen, &job, &err)) {
		char *id = al_job_peek_id(raw, rawlen);

		refuse(s, entry, id ? id : field_id, err.msg, raw, rawlen);
		free(id);
		return;
	}
	if (field_id && strcmp(field_id, job.id)) {
		snprintf(err.msg, sizeof(err.msg), "id: the entry's id field \"%s\" is not the job's id \"%s\"",
			 field_id, job.id);
		refuse(s, entry, field_id, err.msg, raw, rawlen);
		al_job_free(&job);
		return;
	}
	if (al_policy_admit(&s->policy, &job, t, &err) || al_job_encode(&job, &enc, &err)) {
		al_log("info", "rejected", "job=%s tier=%s tenant=%s reason=\"%s\"", job.id, job.tier,
		       job.tenant, err.msg);
		s->rejected++;
		commit(s, job.id, -1, AL_ST_REJECTED, err.msg, AL_KEY_INTAKE, entry, AL_GROUP_SCHEDULER,
		       raw, rawlen);
		goto out;
	}
	tp = al_policy_tenant(&s->policy, job.tenant);
	a = &batch->items[batch->n];
	memset(a, 0, sizeof(*a));
	if (!(a->raw = malloc(rawlen ? rawlen : 1)))
		goto out; /* stays pending; another pass takes it over */
	memcpy(a->raw, raw, rawlen);
	a->rawlen = rawlen;
	snprintf(a->entry, sizeof(a->entry), "%s", entry);
	snprintf(a->id, sizeof(a->id), "%s", job.id);
	snprintf(a->tenant, sizeof(a->tenant), "%s", job.tenant);
	al_admit_add(&batch->call, &(struct al_admit_item){
					   .id = job.id, .tier = job.tier, .tenant = job.tenant,
					   .entry = entry, .job = enc.data, .joblen = enc.len,
					   .priority = job.priority, .max_attempts = job.max_attempts,
					   .now_ms = t, .deadline_ms = job.deadline_ms,
					   .max_queued = tp->max_queued, .rate_per_s = tp->rate_per_s,
					   .max_running = tp->max_running });
	batch->n++;
out:
	al_buf_free(&enc);
	al_job_free(&job);
}

/* Admit the entries of one intake read (XREADGROUP's or XAUTOCLAIM's list
 * of [entry id, fields]). */
static void admit_entries(struct sched *s, redisReply *list)
{
	struct admit_batch *batch;

	if (list->type != REDIS_REPLY_ARRAY || list->elements == 0)
		return;
	batch = calloc(1, sizeof(*batch) + (list->elements + 1) * sizeof(struct admit_item));
	if (!batch)
		return; /* the entries stay pending; taken over later */
	batch->s = s;
	al_admit_init(&batch->call);
	for (size_t j = 0; j < list->elements; j++) {
		redisReply *e = list->element[j];
		const char *raw = NULL, *field_id;
		size_t rawlen = 0;

		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    e->element[0]->type != REDIS_REPLY_STRING)
			continue;
		field_id = entry_id_field(e->element[1]);
		if (e->element[1]->type == REDIS_REPLY_ARRAY)
			for (size_t k = 0; k + 1 < e->element[1]->elements; k += 2)
				if (e->element[1]->element[k]->type == REDIS_REPLY_STRING &&
				    !strcmp(e->element[1]->element[k]->str, "job")) {
					raw = e->element[1]->element[k + 1]->str;
					rawlen = e->element[1]->element[k + 1]->len;
				}
		if (!raw) {
			refuse(s, e->element[0]->str, field_id, "job: the intake entry has no job field",
			       NULL, 0);
			continue;
		}
		admit_entry(s, batch, e->element[0]->str, raw, rawlen, field_id);
	}
	if (batch->n == 0 || al_aconn_call(s->cmd, &batch->call, on_admit, batch))
		admit_batch_free(batch);
}

static void on_intake(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	s->fetching = false;
	if (r && r->type == REDIS_REPLY_ERROR) {
		al_log("error", "intake", "error=\"%s\"", r->str);
		if (!strncmp(r->str, "NOGROUP", 7)) {
			const char *argv[] = { "XGROUP", "CREATE", AL_KEY_INTAKE, AL_GROUP_SCHEDULER, "0",
					       "MKSTREAM" };

			al_aconn_cmd(s->cmd, NULL, NULL, 6, argv, NULL);
		}
	}
	if (r && r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_ARRAY && r->element[i]->elements == 2)
				admit_entries(s, r->element[i]->element[1]);
	if (r)
		maybe_fetch(s);
}

static void maybe_fetch(struct sched *s)
{
	const char *argv[] = { "XREADGROUP", "GROUP", AL_GROUP_SCHEDULER, s->id, "COUNT",
			       INTAKE_BATCH, "BLOCK", "1000", "STREAMS", AL_KEY_INTAKE, ">" };

	if (s->fetching || s->stopping || !al_aconn_is_up(s->fetch) || !al_aconn_is_up(s->cmd))
		return;
	if (al_aconn_cmd(s->fetch, on_intake, s, sizeof(argv) / sizeof(argv[0]), argv, NULL) == 0)
		s->fetching = true;
}

/* Entries read but never admitted, by this scheduler before a crash (same
 * id, read at start) or by any scheduler that went quiet (XAUTOCLAIM). */
static void on_own_pending(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_ARRAY && r->element[i]->elements == 2)
				admit_entries(s, r->element[i]->element[1]);
}

static void on_intake_claimed(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
		return;
	if (r->element[1]->type == REDIS_REPLY_ARRAY && r->element[1]->elements) {
		al_log("warn", "intake_takeover", "entries=%zu note=\"read by a scheduler that went quiet; admitting them\"",
		       r->element[1]->elements);
		admit_entries(s, r->element[1]);
	}
}

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
			al_log("info", "reclaimed", "job=%s attempt=%s stream=%s note=\"lease expired; re-queued\"",
			       rc->id, rc->attempt, rc->stream);
		} else if (r->integer == AL_RECLAIM_EXHAUSTED) {
			char msg[200];

			s->lost++;
			snprintf(msg, sizeof(msg),
				 "every attempt's worker died or went silent (%s attempts)", rc->attempt);
			al_log("warn", "worker_lost", "job=%s attempts=%s", rc->id, rc->attempt);
			commit(s, rc->id, atol(rc->attempt), AL_ST_WORKER_LOST, msg, rc->stream, rc->entry,
			       AL_GROUP_WORKERS, NULL, 0);
			dead_letter(s, rc->stream, rc->entry, msg, rc->id, NULL, 0);
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
};

static void on_autoclaim_stream(redisAsyncContext *ac, void *reply, void *priv)
{
	struct autoclaim_ctx *ctx = priv;
	struct sched *s = ctx->s;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    r->element[1]->type != REDIS_REPLY_ARRAY)
		goto out;
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
			dead_letter(s, rc->stream, rc->entry, "malformed queue entry: needs id and attempt",
				    NULL, NULL, 0);
			al_xack_call(&c, rc->stream, AL_GROUP_WORKERS, rc->entry);
			call(s, &c, "xack");
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
static void reclaim(struct sched *s)
{
	char lease[24], consumer[100];

	if (al_mono_ms() - s->up_ms < s->policy.lease_ms)
		return;
	snprintf(lease, sizeof(lease), "%llu", (unsigned long long)s->policy.lease_ms);
	snprintf(consumer, sizeof(consumer), "reclaimer-%s", s->id);
	for (size_t i = 0; i < s->policy.ntiers; i++) {
		for (int b = 0; b < AL_BANDS; b++) {
			struct autoclaim_ctx *ctx = calloc(1, sizeof(*ctx));

			if (!ctx)
				return;
			ctx->s = s;
			al_key_queue(ctx->stream, s->policy.tiers[i].name, b);
			{
				const char *argv[] = { "XAUTOCLAIM", ctx->stream, AL_GROUP_WORKERS, consumer,
						       lease, "0-0", "COUNT", "100" };

				if (al_aconn_cmd(s->cmd, on_autoclaim_stream, ctx, 8, argv, NULL))
					free(ctx);
			}
		}
	}
	{
		const char *argv[] = { "XAUTOCLAIM", AL_KEY_INTAKE, AL_GROUP_SCHEDULER, s->id, lease,
				       "0-0", "COUNT", INTAKE_BATCH };

		al_aconn_cmd(s->cmd, on_intake_claimed, s, 8, argv, NULL);
	}
}

static void on_due_deadlines(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return;
	for (size_t i = 0; i < r->elements; i++) {
		const char *id = r->element[i]->str;
		struct al_result res = { 0 };
		struct al_buf b = { 0 };
		struct al_call c;

		if (r->element[i]->type != REDIS_REPLY_STRING || !al_job_id_ok(id, r->element[i]->len))
			continue;
		res.version = AL_PROTO_VERSION;
		res.id = (char *)id;
		res.status = AL_ST_EXPIRED;
		res.error = (char *)"not started before its deadline";
		res.finished_ms = al_now_ms();
		if (al_result_encode(&res, &b, NULL))
			continue;
		al_expire_call(&c, id, b.data, b.len, s->policy.result_ttl_ms);
		al_aconn_send(s->cmd, &c, on_reply_log, (void *)"expire");
		al_call_free(&c);
		al_buf_free(&b);
	}
}

/* ---- metrics ---- */

struct snap {
	struct sched *s;
	int outstanding;
	struct evbuffer *out;
};

static void snap_done(struct snap *sn)
{
	struct sched *s = sn->s;
	size_t n = evbuffer_get_length(sn->out);

	free(s->metrics);
	s->metrics = malloc(n + 1);
	if (s->metrics) {
		evbuffer_remove(sn->out, s->metrics, n);
		s->metrics[n] = '\0';
	}
	evbuffer_free(sn->out);
	free(sn);
}

struct snap_part {
	struct snap *sn;
	char what[AL_KEY_MAX];
};

static void on_snap(redisAsyncContext *ac, void *reply, void *priv)
{
	struct snap_part *p = priv;
	struct snap *sn = p->sn;
	redisReply *r = reply;

	(void)ac;
	if (r && !strncmp(p->what, "q ", 2) && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	    r->element[1]->type == REDIS_REPLY_INTEGER) {
		/* TRIM's reply: {trimmed, lag, pending} */
		char tier[AL_ID_MAX + 1], band[8];

		if (sscanf(p->what + 2, "%64[^ ] %7s", tier, band) == 2) {
			evbuffer_add_printf(sn->out, "airlock_queue_depth{tier=\"%s\",band=\"%s\"} %lld\n",
					    tier, band, r->element[1]->integer);
			evbuffer_add_printf(sn->out, "airlock_jobs_running{tier=\"%s\",band=\"%s\"} %lld\n",
					    tier, band, r->element[2]->integer);
		}
	} else if (r && !strcmp(p->what, "stats") && r->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i + 1 < r->elements; i += 2) {
			const char *k = r->element[i]->str, *v = r->element[i + 1]->str;

			if (!strncmp(k, "status:", 7))
				evbuffer_add_printf(sn->out, "airlock_jobs_total{status=\"%s\"} %s\n", k + 7, v);
			else if (!strcmp(k, "reclaimed"))
				evbuffer_add_printf(sn->out, "airlock_reclaimed_total %s\n", v);
			else if (!strcmp(k, "retries"))
				evbuffer_add_printf(sn->out, "airlock_retries_total %s\n", v);
		}
	} else if (r && !strcmp(p->what, "workers") && r->type == REDIS_REPLY_ARRAY &&
		   r->elements == 4) {
		evbuffer_add_printf(sn->out, "airlock_workers_live %lld\n", r->element[0]->integer);
		evbuffer_add_printf(sn->out, "airlock_slots_busy %lld\n", r->element[1]->integer);
		evbuffer_add_printf(sn->out, "airlock_slots_free %lld\n",
				    r->element[2]->integer - r->element[1]->integer);
		evbuffer_add_printf(sn->out, "airlock_jobs_held %lld\n", r->element[3]->integer);
	} else if (r && !strcmp(p->what, "dlq") && r->type == REDIS_REPLY_INTEGER) {
		evbuffer_add_printf(sn->out, "airlock_dead_letters %lld\n", r->integer);
	} else if (r && !strcmp(p->what, "delayed") && r->type == REDIS_REPLY_INTEGER) {
		evbuffer_add_printf(sn->out, "airlock_retries_waiting %lld\n", r->integer);
	} else if (r && !strncmp(p->what, "h ", 2) && r->type == REDIS_REPLY_ARRAY) {
		/* al:hist:<tier>:<backend> -> cumulative histogram lines */
		static const char *const bounds[] = { "5", "10", "25", "50", "100", "250", "500",
						      "1000", "2500", "5000", "10000", "30000", "60000" };
		char tier[AL_ID_MAX + 1], backend[32];

		if (sscanf(p->what + 2, "al:hist:%64[^:]:%31s", tier, backend) == 2) {
			for (int kind = 0; kind < 2; kind++) {
				const char *name = kind ? "run" : "wait";
				const char *metric = kind ? "airlock_run_seconds" : "airlock_queue_wait_seconds";
				char want[48];

				long long cum = 0, total = 0;
				double sum = 0;

				for (size_t bi = 0; bi <= sizeof(bounds) / sizeof(bounds[0]); bi++) {
					bool inf = bi == sizeof(bounds) / sizeof(bounds[0]);

					snprintf(want, sizeof(want), "%s_in_%s", name, inf ? "inf" : bounds[bi]);
					for (size_t i = 0; i + 1 < r->elements; i += 2)
						if (!strcmp(r->element[i]->str, want))
							cum += atoll(r->element[i + 1]->str);
					if (inf)
						total = cum;
					else
						evbuffer_add_printf(sn->out,
								    "%s_bucket{tier=\"%s\",backend=\"%s\",le=\"%g\"} %lld\n",
								    metric, tier, backend, atof(bounds[bi]) / 1000, cum);
				}
				snprintf(want, sizeof(want), "%s_sum_ms", name);
				for (size_t i = 0; i + 1 < r->elements; i += 2)
					if (!strcmp(r->element[i]->str, want))
						sum = atof(r->element[i + 1]->str) / 1000;
				evbuffer_add_printf(sn->out, "%s_bucket{tier=\"%s\",backend=\"%s\",le=\"+Inf\"} %lld\n",
						    metric, tier, backend, total);
				evbuffer_add_printf(sn->out, "%s_count{tier=\"%s\",backend=\"%s\"} %lld\n", metric,
						    tier, backend, total);
				evbuffer_add_printf(sn->out, "%s_sum{tier=\"%s\",backend=\"%s\"} %g\n", metric, tier,
						    backend, sum);
			}
		}
	} else if (r && !strcmp(p->what, "hkeys") && r->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i < r->elements; i++) {
			struct snap_part *q = calloc(1, sizeof(*q));
			const char *argv[] = { "HGETALL", r->element[i]->str };

			if (!q)
				continue;
			q->sn = sn;
			snprintf(q->what, sizeof(q->what), "h %s", r->element[i]->str);
			sn->outstanding++;
			if (al_aconn_cmd(sn->s->cmd, on_snap, q, 2, argv, NULL)) {
				sn->outstanding--;
				free(q);
			}
		}
	}
	free(p);
	if (--sn->outstanding == 0)
		snap_done(sn);
}


static const char lua_workers[] =
	"local live, busy, slots, held = 0, 0, 0, 0\n"
	"local all = redis.call('HGETALL', 'al:workers')\n"
	"for i = 1, #all, 2 do\n"
	"  if redis.call('EXISTS', 'al:worker:' .. all[i]) == 1 then\n"
	"    live = live + 1\n"
	"    busy = busy + (tonumber(string.match(all[i+1], '\"busy\":(%d+)')) or 0)\n"
	"    slots = slots + (tonumber(string.match(all[i+1], '\"slots\":(%d+)')) or 0)\n"
	"    held = held + (tonumber(string.match(all[i+1], '\"held\":(%d+)')) or 0)\n"
	"  end\n"
	"end\n"
	"return {live, busy, slots, held}\n";

static void snapshot(struct sched *s)
{
	struct snap *sn = calloc(1, sizeof(*sn));

	if (!sn || !(sn->out = evbuffer_new())) {
		free(sn);
		return;
	}
	sn->s = s;
	sn->outstanding = 1; /* released at the end of this function */
	evbuffer_add_printf(sn->out, "airlock_scheduler_admitted_total %llu\n",
			    (unsigned long long)s->admitted);
	evbuffer_add_printf(sn->out, "airlock_scheduler_rejected_total %llu\n",
			    (unsigned long long)s->rejected);
	evbuffer_add_printf(sn->out, "airlock_scheduler_reclaimed_total %llu\n",
			    (unsigned long long)s->reclaimed);
	evbuffer_add_printf(sn->out, "airlock_scheduler_worker_lost_total %llu\n",
			    (unsigned long long)s->lost);
	for (size_t i = 0; i < s->policy.ntiers; i++) {
		for (int b = 0; b < AL_BANDS; b++) {
			struct snap_part *p = calloc(1, sizeof(*p));
			char key[AL_KEY_MAX];
			struct al_call c;

			if (!p)
				continue;
			p->sn = sn;
			al_trim_call(&c, al_key_queue(key, s->policy.tiers[i].name, b), AL_GROUP_WORKERS);
			snprintf(p->what, sizeof(p->what), "q %s %s", s->policy.tiers[i].name,
				 al_band_name(b));
			sn->outstanding++;
			if (al_aconn_send(s->cmd, &c, on_snap, p)) {
				sn->outstanding--;
				free(p);
			}
			al_call_free(&c);
		}
	}
	{
		struct al_call c;

		al_trim_call(&c, AL_KEY_INTAKE, AL_GROUP_SCHEDULER);
		al_aconn_send(s->cmd, &c, on_reply_log, (void *)"trim");
		al_call_free(&c);
	}
	{
		static const char *const parts[][4] = {
			{ "stats", "HGETALL", AL_KEY_STATS, NULL },
			{ "dlq", "XLEN", AL_KEY_DLQ, NULL },
			{ "delayed", "ZCARD", AL_KEY_DELAYED, NULL },
			{ "hkeys", "KEYS", "al:hist:*", NULL },
		};

		for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
			struct snap_part *p = calloc(1, sizeof(*p));

			if (!p)
				continue;
			p->sn = sn;
			snprintf(p->what, sizeof(p->what), "%s", parts[i][0]);
			sn->outstanding++;
			if (al_aconn_cmd(s->cmd, on_snap, p, 2, &parts[i][1], NULL)) {
				sn->outstanding--;
				free(p);
			}
		}
	}
	{
		struct snap_part *p = calloc(1, sizeof(*p));
		const char *argv[] = { "EVAL", lua_workers, "0" };

		if (p) {
			p->sn = sn;
			snprintf(p->what, sizeof(p->what), "workers");
			sn->outstanding++;
			if (al_aconn_cmd(s->cmd, on_snap, p, 3, argv, NULL)) {
				sn->outstanding--;
				free(p);
			}
		}
	}
	if (--sn->outstanding == 0)
		snap_done(sn);
}

static void on_http(struct evhttp_request *req, void *arg)
{
	struct sched *s = arg;
	const char *uri = evhttp_request_get_uri(req);
	struct evbuffer *buf = evbuffer_new();
	bool ok;

	if (!buf) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	if (!strcmp(uri, "/metrics")) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  "text/plain; version=0.0.4");
		evbuffer_add_printf(buf, "airlock_redis_up %d\n", al_aconn_is_up(s->cmd) ? 1 : 0);
		evbuffer_add_printf(buf, "airlock_policy_tiers %zu\n", s->policy.ntiers);
		if (s->metrics)
			evbuffer_add(buf, s->metrics, strlen(s->metrics));
		evhttp_send_reply(req, 200, "OK", buf);
	} else if (!strcmp(uri, "/healthz")) {
		ok = al_aconn_is_up(s->cmd) && s->policy.ntiers > 0;
		evbuffer_add_printf(buf, "{\"redis\":%s,\"policy\":\"%s\",\"tiers\":%zu}\n",
				    al_aconn_is_up(s->cmd) ? "true" : "false", s->policy.source,
				    s->policy.ntiers);
		evhttp_send_reply(req, ok ? 200 : 503, ok ? "OK" : "Unavailable", buf);
	} else {
		evhttp_send_error(req, 404, "try /metrics or /healthz");
	}
	evbuffer_free(buf);
}

/* ---- loop ---- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sched *s = arg;
	struct timeval tv = { 0, TICK_MS * 1000 };
	uint64_t t = al_now_ms();
	char now[24];

	(void)fd;
	(void)what;
	evtimer_add(s->tick, &tv);
	if (!al_aconn_is_up(s->cmd))
		return;
	snprintf(now, sizeof(now), "%llu", (unsigned long long)t);
	{
		struct al_call c;

		al_promote_call(&c, t, 500);
		al_aconn_send(s->cmd, &c, on_reply_log, (void *)"promote");
		al_call_free(&c);
	}
	{
		const char *argv[] = { "ZRANGEBYSCORE", AL_KEY_DEADLINES, "-inf", now, "LIMIT", "0", "500" };

		al_aconn_cmd(s->cmd, on_due_deadlines, s, 7, argv, NULL);
	}
	if (t - s->last_reclaim_ms >= s->policy.lease_ms / 4) {
		s->last_reclaim_ms = t;
		reclaim(s);
	}
	if (s->vms && t - s->last_vm_ms >= 1000) {
		s->last_vm_ms = t;
		if (!s->reconciled) {
			s->reconciled = true;
			al_vmlease_reconcile(s->vms);
		}
		al_vmlease_tick(s->vms, t);
	}
	if (t - s->last_snapshot_ms >= 1000) { /* also trims the streams */
		s->last_snapshot_ms = t;
		snapshot(s);
	}
}

static void on_cmd_up(struct al_aconn *c, void *arg)
{
	struct sched *s = arg;
	const char *grp[] = { "XGROUP", "CREATE", AL_KEY_INTAKE, AL_GROUP_SCHEDULER, "0", "MKSTREAM" };
	const char *mine[] = { "XREADGROUP", "GROUP", AL_GROUP_SCHEDULER, s->id, "COUNT", "1000",
			       "STREAMS", AL_KEY_INTAKE, "0" };

	(void)c;
	al_log("info", "redis_up", "scheduler=%s note=\"reclaiming after one lease\"", s->id);
	s->up_ms = al_mono_ms();
	al_aconn_cmd(s->cmd, NULL, NULL, 6, grp, NULL);
	for (size_t i = 0; i < s->policy.ntiers; i++) {
		for (int b = 0; b < AL_BANDS; b++) {
			char key[AL_KEY_MAX];
			const char *argv[] = { "XGROUP", "CREATE", key, AL_GROUP_WORKERS, "0", "MKSTREAM" };

			al_key_queue(key, s->policy.tiers[i].name, b);
			al_aconn_cmd(s->cmd, NULL, NULL, 6, argv, NULL);
		}
	}
	/* Our own unfinished intake entries (the same scheduler id after a
	 * crash), once per run: after a reconnect, the admissions this run sent
	 * are still on their way (kept and sent again by the connection). */
	if (!s->read_own && al_aconn_cmd(s->cmd, on_own_pending, s, 9, mine, NULL) == 0)
		s->read_own = true;
	maybe_fetch(s);
}

static void on_fetch_up(struct al_aconn *c, void *arg)
{
	(void)c;
	maybe_fetch(arg);
}

static void on_down(struct al_aconn *c, void *arg)
{
	struct sched *s = arg;

	if (c == s->fetch)
		s->fetching = false;
	al_log("warn", "redis_down", "conn=%s note=\"reconnecting\"", c == s->cmd ? "cmd" : "fetch");
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct sched *s = arg;
	struct al_policy fresh;
	struct al_err err = { 0 };

	(void)sig;
	(void)what;
	if (al_policy_load(s->policy_path, &fresh, &err)) {
		al_log("error", "policy_reload", "result=refused error=\"%s\" note=\"the old policy stays in force\"",
		      err.msg);
		return;
	}
	al_policy_free(&s->policy);
	s->policy = fresh;
	al_log("info", "policy_reload", "result=ok source=%s tiers=%zu", s->policy.source,
	      s->policy.ntiers);
	if (al_aconn_is_up(s->cmd))
		on_cmd_up(s->cmd, s);
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct sched *s = arg;

	(void)what;
	al_log("info", "stop", "signal=%d", (int)sig);
	s->stopping = true;
	event_base_loopexit(s->base, NULL);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: airlock-scheduler [options]\n"
		   "  --redis URL      redis://host:port or unix:///path.sock (AIRLOCK_REDIS)\n"
		   "  --policy FILE    the operator's policy (AIRLOCK_POLICY; default built-in)\n"
		   "  --listen H:P     metrics and health over HTTP (default 127.0.0.1:9464; \"off\")\n"
		   "  --id NAME        scheduler name (default host-pid)\n"
		   "  --libvirt URI    end service VMs' leases and reconcile this libvirt with Redis\n"
		   "                   (run the scheduler on the VM host; default: no VM management)\n"
		   "  --check          load the policy, report, and exit\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "redis", required_argument, NULL, 'r' }, { "policy", required_argument, NULL, 'p' },
		{ "listen", required_argument, NULL, 'l' }, { "id", required_argument, NULL, 'i' },
		{ "check", no_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' }, { "libvirt", required_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	struct sched s = { 0 };
	const char *redis = getenv("AIRLOCK_REDIS") ? getenv("AIRLOCK_REDIS") : "redis://127.0.0.1:6379";
	const char *listen = getenv("AIRLOCK_LISTEN") ? getenv("AIRLOCK_LISTEN") : "127.0.0.1:9464";
	struct al_err err = { 0 };
	bool check = false;
	int c;

	s.policy_path = getenv("AIRLOCK_POLICY");
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': redis = optarg; break;
		case 'p': s.policy_path = optarg; break;
		case 'l': listen = optarg; break;
		case 'i': snprintf(s.id, sizeof(s.id), "%s", optarg); break;
		case 'c': check = true; break;
		case 'v': s.libvirt_uri = optarg; break;
		case 'V': printf("airlock-scheduler protocol %d\n", AL_PROTO_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (al_policy_load(s.policy_path, &s.policy, &err)) {
		fprintf(stderr, "airlock-scheduler: %s\n", err.msg);
		return 2;
	}
	if (check) {
		printf("policy %s: %zu tiers, %zu tenants\n", s.policy.source, s.policy.ntiers,
		       s.policy.ntenants);
		for (size_t i = 0; i < s.policy.ntiers; i++)
			printf("  tier %s -> %s\n", s.policy.tiers[i].name, s.policy.tiers[i].backend);
		al_policy_free(&s.policy);
		return 0;
	}
	if (al_redis_url_parse(redis, &s.url, &err)) {
		fprintf(stderr, "airlock-scheduler: %s\n", err.msg);
		return 2;
	}
	if (!s.id[0]) {
		char host[48] = "host";

		gethostname(host, sizeof(host) - 1);
		snprintf(s.id, sizeof(s.id), "%.40s-%d", host, (int)getpid());
	}
	signal(SIGPIPE, SIG_IGN);
	s.base = event_base_new();
	if (strcmp(listen, "off")) {
		char host[128];
		int port;

		if (sscanf(listen, "%127[^:]:%d", host, &port) != 2 || port < 0 || port > 65535) {
			fprintf(stderr, "airlock-scheduler: --listen: expected host:port, got \"%s\"\n", listen);
			return 2;
		}
		s.http = evhttp_new(s.base);
		if (!s.http || evhttp_bind_socket(s.http, host, (uint16_t)port)) {
			fprintf(stderr, "airlock-scheduler: cannot listen on %s: %s\n", listen, strerror(errno));
			return 2;
		}
		evhttp_set_gencb(s.http, on_http, &s);
	}
	s.tick = evtimer_new(s.base, on_tick, &s);
	s.sighup = evsignal_new(s.base, SIGHUP, on_hup, &s);
	s.sigterm = evsignal_new(s.base, SIGTERM, on_stop, &s);
	s.sigint = evsignal_new(s.base, SIGINT, on_stop, &s);
	evsignal_add(s.sighup, NULL);
	evsignal_add(s.sigterm, NULL);
	evsignal_add(s.sigint, NULL);
	s.cmd = al_aconn_new(s.base, &s.url, "cmd", on_cmd_up, on_down, &s);
	s.fetch = al_aconn_new(s.base, &s.url, "fetch", on_fetch_up, on_down, &s);
	if (s.libvirt_uri) {
		s.vms = al_vmlease_new(s.libvirt_uri, s.cmd, s.policy.result_ttl_ms, &err);
		if (!s.vms) {
			fprintf(stderr, "airlock-scheduler: --libvirt: %s\n", err.msg);
			return 2;
		}
	}
	on_tick(-1, 0, &s);
	al_log("info", "scheduler_start", "id=%s policy=%s tiers=%zu listen=%s", s.id, s.policy.source,
	      s.policy.ntiers, listen);
	event_base_dispatch(s.base);
	al_vmlease_free(s.vms);
	al_aconn_free(s.cmd);
	al_aconn_free(s.fetch);
	if (s.http)
		evhttp_free(s.http);
	event_free(s.tick);
	event_free(s.sighup);
	event_free(s.sigterm);
	event_free(s.sigint);
	event_base_free(s.base);
	free(s.metrics);
	al_policy_free(&s.policy);
	return 0;
}
