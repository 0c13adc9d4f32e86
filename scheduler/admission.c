/* admission.c - admission (see sched.h): intake entries read in batches,
 * checked against the policy, admitted by the ADMIT script or refused with
 * the reason; takeover of what a dead scheduler read but never admitted. */
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
	struct al_call sc_call;
	struct admit_item items[];
};

static void admit_batch_free(struct admit_batch *b)
{
	for (int i = 0; i < b->n; i++)
		free(b->items[i].raw);
	al_call_free(&b->sc_call);
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
		goto out_batch;
	if (r->type != REDIS_REPLY_ARRAY || (int)r->elements != b->n) {
		al_log("error", "admit",
		       "jobs=%d error=\"%s\" type=%d elements=%zu note=\"entries stay pending; "
		       "another scheduler takes them over\"",
		       b->n, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply", r->type,
		       r->elements);
		goto out_batch;
	}
	for (int i = 0; i < b->n; i++) {
		struct admit_item *a = &b->items[i];
		long long code =
		    r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : -9;

		switch (code) {
		case AL_ADMIT_QUEUED:
			s->admitted++;
			queued++;
			break;
		case AL_ADMIT_AGAIN: /* a repeated ADMIT: it was admitted before */
		case AL_ADMIT_FINISHED: /* cancelled before admission: its result exists */ break;
		case AL_ADMIT_ID_TAKEN: {
			char msg[160];

			snprintf(msg, sizeof(msg),
				 "duplicate job id: %s belongs to another submission; this entry "
				 "never runs",
				 a->id);
			sc_dead_letter(s, AL_KEY_INTAKE, a->entry, msg, a->id, a->raw, a->rawlen);
			break;
		}
		case AL_ADMIT_QUEUE_FULL:
		case AL_ADMIT_RATE: {
			char msg[200];

			snprintf(msg, sizeof(msg), "tenant %s: %s", a->tenant,
				 code == AL_ADMIT_QUEUE_FULL
				     ? "queue quota (max_queued) reached"
				     : "submission rate (rate_per_s) exceeded");
			s->rejected++;
			al_log("info", "rejected", "job=%s reason=\"%s\"", a->id, msg);
			sc_commit(s, a->id, -1, AL_ST_REJECTED, msg,
				  code == AL_ADMIT_QUEUE_FULL ? "max_queued" : "rate_per_s",
				  AL_KEY_INTAKE, a->entry, AL_GROUP_SCHEDULER, a->raw, a->rawlen);
			break;
		}
		default: al_log("error", "admit", "job=%s error=\"unexpected reply\"", a->id);
		}
	}
	if (queued)
		al_log("info", "admitted", "jobs=%d total=%llu", queued,
		       (unsigned long long)s->admitted);
out_batch:
	admit_batch_free(b);
}

/* The value of an intake entry's field (its length in *len), or NULL. */
static const redisReply *entry_field(const redisReply *fields, const char *name)
{
	if (fields->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t k = 0; k + 1 < fields->elements; k += 2) {
		const redisReply *key = fields->element[k], *val = fields->element[k + 1];

		if (key->type == REDIS_REPLY_STRING && val->type == REDIS_REPLY_STRING &&
		    !strcmp(key->str, name))
			return val;
	}
	return NULL;
}

/* A field that must hold an id (`id` beside `job`, which clients that XADD
 * by hand are asked to set; a cancel request's `cancel` and `reply`), when
 * it is a well-formed one. */
static const char *entry_id_field(const redisReply *fields, const char *name)
{
	const redisReply *v = entry_field(fields, name);

	return v && al_job_id_ok(v->str, v->len) ? v->str : NULL;
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
		sc_commit(s, id, -1, AL_ST_REJECTED, why, NULL, AL_KEY_INTAKE, entry,
			  AL_GROUP_SCHEDULER, raw, rawlen);
	} else {
		sc_dead_letter(s, AL_KEY_INTAKE, entry, why, NULL, raw, rawlen);
		sc_ack_intake(s, entry);
	}
}

/* Check one entry against the policy; admissible ones join the batch. */
static void admit_entry(struct sched *s, struct admit_batch *batch, const char *entry,
			const char *raw, size_t rawlen, const char *field_id)
{
	struct al_job job;
	struct al_err err = {0};
	struct admit_item *a;
	struct al_buf enc = {0};
	const struct al_tenant_policy *tp;
	uint64_t t = sc_now_ms(s);

	if (al_job_decode(raw, rawlen, &job, &err)) {
		char *id = al_job_peek_id(raw, rawlen);

		refuse(s, entry, id ? id : field_id, err.msg, raw, rawlen);
		free(id);
		return;
	}
	if (field_id && strcmp(field_id, job.id)) {
		snprintf(err.msg, sizeof(err.msg),
			 "id: the entry's id field \"%s\" is not the job's id \"%s\"", field_id,
			 job.id);
		refuse(s, entry, field_id, err.msg, raw, rawlen);
		al_job_free(&job);
		return;
	}
	if (al_policy_admit(&s->policy, &job, t, &err) || al_job_encode(&job, &enc, &err)) {
		al_log("info", "rejected", "job=%s tier=%s tenant=%s reason=\"%s\"", job.id,
		       job.tier, job.tenant, err.msg);
		s->rejected++;
		sc_commit(s, job.id, -1, AL_ST_REJECTED, err.msg, NULL, AL_KEY_INTAKE, entry,
			  AL_GROUP_SCHEDULER, raw, rawlen);
		goto out_job;
	}
	tp = al_policy_tenant(&s->policy, job.tenant);
	a = &batch->items[batch->n];
	memset(a, 0, sizeof(*a));
	if (!(a->raw = malloc(rawlen ? rawlen : 1)))
		goto out_job; /* stays pending; another pass takes it over */
	memcpy(a->raw, raw, rawlen);
	a->rawlen = rawlen;
	snprintf(a->entry, sizeof(a->entry), "%s", entry);
	snprintf(a->id, sizeof(a->id), "%s", job.id);
	snprintf(a->tenant, sizeof(a->tenant), "%s", job.tenant);
	al_admit_add(&batch->sc_call, &(struct al_admit_item){.id = job.id,
							      .tier = job.tier,
							      .tenant = job.tenant,
							      .entry = entry,
							      .job = enc.data,
							      .joblen = enc.len,
							      .priority = job.priority,
							      .max_attempts = job.max_attempts,
							      .now_ms = t,
							      .deadline_ms = job.deadline_ms,
							      .max_queued = tp->max_queued,
							      .rate_per_s = tp->rate_per_s,
							      .max_running = tp->max_running});
	batch->n++;
out_job:
	al_buf_free(&enc);
	al_job_free(&job);
}

/* ---- cancel requests (PROTOCOL.md "Cancel") ----
 * Clients may not write records or results: they append `cancel <id> reply
 * <nonce>` to the intake, and the scheduler runs CANCEL, which answers on
 * al:reply:<nonce> and acknowledges the entry. */

struct cancel_ctx {
	char id[AL_ID_MAX + 1];
	char entry[64];
};

static void on_cancel(redisAsyncContext *ac, void *reply, void *priv)
{
	struct cancel_ctx *cc = priv;
	redisReply *r = reply;
	static const char *const what[] = {"finished", "ended", "kill_sent"};

	(void)ac;
	if (r && r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= 2)
		al_log("info", "cancel", "job=%s entry=%s outcome=%s", cc->id, cc->entry,
		       what[r->integer]);
	else if (r && r->type == REDIS_REPLY_INTEGER && r->integer == AL_CANCEL_UNKNOWN)
		al_log("info", "cancel", "job=%s entry=%s outcome=unknown_job", cc->id, cc->entry);
	else if (r) /* the request stays pending: taken over later */
		al_log("error", "cancel", "job=%s entry=%s error=\"%s\"", cc->id, cc->entry,
		       r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
	free(cc);
}

static void cancel_entry(struct sched *s, const char *entry, const redisReply *fields)
{
	const char *id = entry_id_field(fields, "cancel"), *nonce = entry_id_field(fields, "reply");
	struct al_result res = {0};
	struct al_buf b = {0};
	struct al_call c;
	struct cancel_ctx *cc;

	if (!id || !nonce) {
		sc_dead_letter(s, AL_KEY_INTAKE, entry,
			       id ? "cancel request: reply is not a well-formed nonce "
				    "([A-Za-z0-9._:-], 1 to 64 bytes)"
				  : "cancel request: cancel is not a well-formed job id",
			       id, NULL, 0);
		sc_ack_intake(s, entry);
		return;
	}
	res.version = AL_PROTO_VERSION;
	res.id = (char *)id;
	res.attempt = 0; /* nothing ran */
	res.status = AL_ST_CANCELLED;
	res.error = (char *)"cancelled by a client before it started";
	res.finished_ms = al_now_ms();
	if (!(cc = calloc(1, sizeof(*cc))) || al_result_encode(&res, &b, NULL)) {
		free(cc);
		al_log("error", "out_of_memory", "job=%s what=cancel", id);
		return; /* stays pending; taken over later */
	}
	snprintf(cc->id, sizeof(cc->id), "%s", id);
	snprintf(cc->entry, sizeof(cc->entry), "%s", entry);
	al_cancel_call(&c, id, b.data, b.len, s->policy.result_ttl_ms, entry, nonce);
	al_buf_free(&b);
	if (al_aconn_call(s->cmd, &c, on_cancel, cc)) {
		al_log("error", "redis_call", "what=cancel job=%s error=\"%s\"", id,
		       al_aconn_strerror(s->cmd));
		free(cc);
	}
	al_call_free(&c);
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
	al_admit_init(&batch->sc_call);
	for (size_t j = 0; j < list->elements; j++) {
		redisReply *e = list->element[j];
		const redisReply *job;
		const char *raw = NULL, *field_id;
		size_t rawlen = 0;

		if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
		    e->element[0]->type != REDIS_REPLY_STRING)
			continue;
		if (entry_field(e->element[1], "cancel")) {
			cancel_entry(s, e->element[0]->str, e->element[1]);
			continue;
		}
		field_id = entry_id_field(e->element[1], "id");
		if ((job = entry_field(e->element[1], "job"))) {
			raw = job->str;
			rawlen = job->len;
		}
		if (!raw) {
			refuse(s, e->element[0]->str, field_id,
			       "job: the intake entry has no job field", NULL, 0);
			continue;
		}
		admit_entry(s, batch, e->element[0]->str, raw, rawlen, field_id);
	}
	if (batch->n == 0 || al_aconn_call(s->cmd, &batch->sc_call, on_admit, batch))
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
			struct al_call c;

			al_xgroup_create_call(&c, AL_KEY_INTAKE, AL_GROUP_SCHEDULER);
			al_aconn_send(s->cmd, &c, NULL, NULL);
			al_call_free(&c);
		}
	}
	if (r && r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_ARRAY &&
			    r->element[i]->elements == 2)
				admit_entries(s, r->element[i]->element[1]);
	if (r)
		sc_maybe_fetch(s);
}

void sc_maybe_fetch(struct sched *s)
{
	const char *argv[] = {
	    "XREADGROUP", "GROUP", AL_GROUP_SCHEDULER, s->id,	      "COUNT", INTAKE_BATCH,
	    "BLOCK",	  "1000",  "STREAMS",	       AL_KEY_INTAKE, ">"};

	if (s->fetching || s->stopping || !al_aconn_is_up(s->fetch) || !al_aconn_is_up(s->cmd))
		return;
	if (al_aconn_cmd(s->fetch, on_intake, s, sizeof(argv) / sizeof(argv[0]), argv, NULL) == 0)
		s->fetching = true;
}

/* Entries read but never admitted, by this scheduler before a crash (same
 * id, read at start) or by any scheduler that went quiet (XAUTOCLAIM). */
void sc_on_own_pending(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_ARRAY &&
			    r->element[i]->elements == 2)
				admit_entries(s, r->element[i]->element[1]);
}

void sc_on_intake_claimed(redisAsyncContext *ac, void *reply, void *priv)
{
	struct sched *s = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
		return;
	if (r->element[1]->type == REDIS_REPLY_ARRAY && r->element[1]->elements) {
		al_log("warn", "intake_takeover",
		       "entries=%zu note=\"read by a scheduler that went quiet; admitting them\"",
		       r->element[1]->elements);
		admit_entries(s, r->element[1]);
	}
}
