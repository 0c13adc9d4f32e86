/* commit.c - what must reach Redis (see worker.h): reliable calls kept until
 * Redis answers, the commit queue and its batches, acks, retries with
 * backoff, dead letters. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../common/aconn.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "worker.h"
#include "../common/clock.h"

/* ---- what must reach Redis ----
 *
 * Every call that changes a job's fate (commit, retry, dead letter, ack)
 * is a reliable call of the command connection (common/aconn.h): kept and
 * sent again after a reset until Redis gives a definite answer. Results
 * wait in w->commits until the end of the loop pass, so that results
 * finishing together go out in one COMMIT call (a single slot's also
 * until the answer to the COMMIT in flight: wk_commits_may_wait). */

/* A reliable call in flight: what to log when it is answered. */
struct call_ctx {
	struct worker *w;
	char what[16];
	char id[AL_ID_MAX + 1];
};

static void call_answered(struct worker *w)
{
	w->inflight--;
	wk_pass_want(w, WK_PASS_EXIT);
}

static void on_call(redisAsyncContext *ac, void *reply, void *priv)
{
	struct call_ctx *q = priv;
	struct worker *w = q->w;
	redisReply *r = reply;

	(void)ac;
	if (!r)
		al_log("warn", "unsent",
		       "job=%s what=%s note=\"Redis did not confirm; the lease will re-deliver\"",
		       q->id, q->what);
	else if (r->type == REDIS_REPLY_ERROR)
		al_log("error", "redis_script", "what=%s job=%s error=\"%s\"", q->what, q->id,
		       r->str);
	else if (r->type == REDIS_REPLY_INTEGER && r->integer == AL_RETRY_STALE &&
		 !strcmp(q->what, "retry"))
		al_log("warn", "stale_attempt",
		       "what=%s job=%s note=\"lease was taken over; refused\"", q->what, q->id);
	free(q);
	call_answered(w);
}

void wk_send_output(struct worker *w, const char *id, unsigned attempt, const char *type,
		    const void *data, size_t len, bool *ttl_set, uint64_t ttl_ms)
{
	struct al_call c;

	al_out_entry_call(&c, id, attempt, type, data, len);
	wk_send_call(w, &c, "output", id);
	if (!*ttl_set) {
		*ttl_set = true;
		al_out_ttl_call(&c, id, ttl_ms);
		wk_send_call(w, &c, "output", id);
	}
}

/* Send call (taken over) reliably; what and id name it in logs. */
void wk_send_call(struct worker *w, struct al_call *call, const char *what, const char *id)
{
	struct call_ctx *q = calloc(1, sizeof(*q));

	if (!q) {
		al_call_free(call);
		al_log("error", "out_of_memory", "job=%s what=%s", id, what);
		return;
	}
	q->w = w;
	snprintf(q->what, sizeof(q->what), "%s", what);
	snprintf(q->id, sizeof(q->id), "%s", id ? id : "-");
	if (al_aconn_call(w->cmd, call, on_call, q)) {
		al_log("error", "redis_call", "job=%s what=%s error=\"%s\"", q->id, what,
		       al_aconn_strerror(w->cmd));
		free(q);
		return;
	}
	w->inflight++;
}

void wk_commit_free(struct commit *c)
{
	free(c->result);
	free(c->callback);
	free(c);
}

/* The result of one commit in a batch. */
static void commit_answered(struct worker *w, struct commit *c, redisReply *e)
{
	if (!e) {
		al_log(
		    "warn", "unsent",
		    "job=%s what=commit note=\"Redis did not confirm; the lease will re-deliver\"",
		    c->id);
	} else if (e->type == REDIS_REPLY_ERROR) {
		al_log("error", "redis_script", "what=commit job=%s error=\"%s\"", c->id, e->str);
	} else if (e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_STALE) {
		al_log(
		    "warn", "stale_attempt",
		    "what=commit job=%s attempt=%ld note=\"lease was taken over; result refused\"",
		    c->id, c->attempt);
	} else if (e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_EXISTS) {
		al_log("warn", "stale_attempt",
		       "what=commit job=%s attempt=%ld note=\"a result exists (another attempt, or "
		       "this one sent again); this one is dropped\"",
		       c->id, c->attempt);
	} else if (e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_DONE && c->callback &&
		   w->hooks) {
		/* Only the committed result is announced, once; to the
		 * addresses the tier's policy (as it is now) allows. */
		char tier[AL_ID_MAX + 1];
		const struct al_tier_policy *t = al_key_queue_tier(c->stream, tier, sizeof(tier))
						     ? al_policy_tier(&w->policy, tier)
						     : NULL;

		struct al_err err = {0};

		if (wk_webhooks_post(w->hooks, c->callback, c->id, c->tenant, c->result, c->len,
				     t ? t->callback_hosts : NULL, t ? t->ncallback_hosts : 0,
				     &err))
			al_log("error", "webhook", "job=%s error=\"%s\"", c->id, err.msg);
	}
}

struct commit_batch {
	struct worker *w;
	int tries;	  /* min_replicas: times sent again because WAIT fell short */
	bool fetch;	  /* the last batch of a flush: may carry the next fetch */
	unsigned fetched; /* ...it did (COMMIT_FETCH), reserving this many slots */
	int n;
	struct commit *c[];
};

#define REPLICATE_TRIES 10 /* min_replicas: a batch is sent this often at most */

static void send_batch(struct worker *w, struct commit_batch *b);

static void on_commit_replicated(redisAsyncContext *ac, void *reply, void *priv);

static void batch_done(struct worker *w, struct commit_batch *b)
{
	for (int i = 0; i < b->n; i++)
		wk_commit_free(b->c[i]);
	free(b);
	call_answered(w);
}

static void on_commit_batch(redisAsyncContext *ac, void *reply, void *priv)
{
	struct commit_batch *b = priv;
	struct worker *w = b->w;
	redisReply *r = reply, *codes = r;
	bool each;

	(void)ac;
	w->commit_batches--;
	if (w->commits) /* results held back for this answer (wk_commits_may_wait) */
		wk_pass_want(w, WK_PASS_FLUSH);
	if (b->fetched && r && r->type == REDIS_REPLY_ARRAY) /* {COMMIT's, FETCH's} */
		codes = r->elements == 2 ? r->element[0] : NULL;
	each = codes && codes->type == REDIS_REPLY_ARRAY && (int)codes->elements == b->n;
	for (int i = 0; b->tries == 0 && i < b->n; i++) /* its answers, said once */
		commit_answered(w, b->c[i], each ? codes->element[i] : codes);
	if (b->fetched) { /* the results are in: then the jobs that follow them */
		unsigned n = b->fetched;
		const redisReply *half = NULL; /* FETCH's: the second, or the whole's error */

		if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
			half = r->element[1];
		else if (r && r->type == REDIS_REPLY_ERROR)
			half = r;
		b->fetched = 0;
		w->commit_rider->answered(w, half, n);
	}
	if (r && w->url.min_replicas) {
		/* durability: the results are kept until WAIT says enough
		 * replicas have them (sent again, also to a new master, else) */
		struct al_call c;
		int rc;

		al_wait_call(&c, (unsigned)w->url.min_replicas,
			     (unsigned)w->url.replica_timeout_ms);
		rc = al_aconn_send(w->cmd, &c, on_commit_replicated, b);
		al_call_free(&c);
		if (rc)
			on_commit_replicated(NULL, NULL, b); /* Redis went away: as short */
		return;
	}
	batch_done(w, b);
}

/* min_replicas: what WAIT said after a batch of commits. */
static void on_commit_replicated(redisAsyncContext *ac, void *reply, void *priv)
{
	struct commit_batch *b = priv;
	struct worker *w = b->w;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_INTEGER && r->integer >= w->url.min_replicas) {
		batch_done(w, b);
		return;
	}
	if (b->tries++ < REPLICATE_TRIES) {
		/* COMMIT again: "exists" where the result is; committed anew on
		 * a master that lost it with a failover */
		al_log("warn", "commit_not_replicated",
		       "jobs=%d replicas=%lld wanted=%d timeout_ms=%d try=%d note=\"results kept "
		       "and sent again until replicas have them\"",
		       b->n, r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1LL,
		       w->url.min_replicas, w->url.replica_timeout_ms, b->tries);
		w->inflight--;
		send_batch(w, b);
		return;
	}
	al_log("error", "commit_not_replicated",
	       "jobs=%d wanted=%d tries=%d note=\"given up: the results are on the master only; a "
	       "failover now loses them and their jobs run again\"",
	       b->n, w->url.min_replicas, b->tries);
	batch_done(w, b);
}

#define COMMIT_BATCH_MAX 64

#define COMMIT_HOLD_MAX 4 /* results a single slot holds back for the COMMIT in flight */

/* Whether the results waiting may wait for the answer to the COMMIT in
 * flight (which wants a flush): a worker of one slot a backend finishes
 * its short jobs one a loop pass, so each would cost Redis a script call
 * of its own; held, COMMIT_HOLD_MAX of them at most go in one. Never while
 * draining. A worker of several slots finishes several jobs a pass already
 * and holds nothing: there holding only delays the fetch that rides on its
 * results (tests/bench/README.md, "One slot's results held back"). The
 * loop pass holds them only while no fetch is due (service.c). */
bool wk_commits_may_wait(const struct worker *w)
{
	unsigned n = 0;

	if (w->conf->slots != 1 || !w->commits || !w->commit_batches || w->draining)
		return false;
	for (const struct commit *c = w->commits; c; c = c->next)
		if (++n >= COMMIT_HOLD_MAX)
			return false;
	return true;
}

/* Send the results waiting in w->commits, COMMIT_BATCH_MAX per call. */
void wk_flush_commits(struct worker *w)
{
	while (w->commits) {
		struct commit_batch *b =
		    calloc(1, sizeof(*b) + COMMIT_BATCH_MAX * sizeof(struct commit *));

		if (!b) {
			al_log("error", "out_of_memory",
			       "what=commit note=\"results kept; tried again\"");
			return;
		}
		b->w = w;
		while (w->commits && b->n < COMMIT_BATCH_MAX) {
			struct commit *c = w->commits;

			w->commits = c->next;
			if (!w->commits)
				w->commits_tail = &w->commits;
			b->c[b->n++] = c;
		}
		b->fetch = !w->commits;
		send_batch(w, b);
	}
}

/* One COMMIT call for the batch's results (taken over). */
static void send_batch(struct worker *w, struct commit_batch *b)
{
	struct al_call call;

	al_call_init(&call, al_lua_commit);
	for (int i = 0; i < b->n; i++) {
		const struct commit *c = b->c[i];

		al_commit_add(&call, &(struct al_commit_item){.id = c->id,
							      .attempt = c->attempt,
							      .result = c->result,
							      .len = c->len,
							      .ttl_ms = w->policy.result_ttl_ms,
							      .stream = c->stream,
							      .entry = c->entry,
							      .group = AL_GROUP_WORKERS,
							      .status = al_status_name(c->status)});
	}
	/* the slots these results freed fetch in the same call (once: not
	 * when min_replicas sends the batch again) */
	if (b->fetch && w->commit_rider)
		b->fetched = w->commit_rider->attach(w, &call, b->n);
	b->fetch = false;
	if (al_aconn_call(w->cmd, &call, on_commit_batch, b)) {
		al_log("error", "redis_call",
		       "what=commit jobs=%d error=\"%s\" note=\"the leases will re-deliver\"", b->n,
		       al_aconn_strerror(w->cmd));
		if (b->fetched)
			w->commit_rider->answered(w, NULL, b->fetched);
		for (int i = 0; i < b->n; i++)
			wk_commit_free(b->c[i]);
		free(b);
		return;
	}
	w->commit_batches++;
	w->inflight++;
}

/* Commit res (the attempt fences it); callback (may be NULL) hears of it
 * once committed. The result is kept until Redis answers. */
static void commit_encoded(struct worker *w, const struct al_result *res, struct al_buf *bp,
			   const char *stream, const char *entry, long attempt,
			   const struct al_job *job);

void wk_commit_result(struct worker *w, const struct al_result *res, const char *stream,
		      const char *entry, long attempt, const struct al_job *job)
{
	struct al_buf b = {0};
	struct al_err err = {0};
	struct al_result check = {0};

	/* A result every reader can decode, or none of it: what a job put in
	 * it that the codec refuses (a text field of bad bytes, say) must not
	 * make the job look like an unreachable Redis to its client. So the
	 * bytes are decoded before they go; if they do not, a sandbox_error
	 * that says why goes instead. */
	if (al_result_encode(res, &b, &err) || al_result_decode(b.data, b.len, &check, &err)) {
		char why[AL_ERR_MSG_MAX + 96];
		struct al_result bad = {.version = AL_PROTO_VERSION,
					.id = res->id,
					.attempt = res->attempt,
					.status = AL_ST_SANDBOX_ERROR,
					.worker = res->worker,
					.backend = res->backend,
					.started_ms = res->started_ms,
					.finished_ms = res->finished_ms,
					.queued_ms = res->queued_ms,
					.wall_ms = res->wall_ms,
					.error = why};

		snprintf(why, sizeof(why),
			 "the job's result could not be stored whole (%s); its output is dropped",
			 err.msg);
		al_log("error", "result_undecodable", "job=%s error=\"%s\"", res->id, err.msg);
		al_result_free(&check);
		al_buf_free(&b);
		err = (struct al_err){0};
		if (al_result_encode(&bad, &b, &err)) {
			al_log("error", "encode_result", "job=%s error=\"%s\"", res->id, err.msg);
			return;
		}
		commit_encoded(w, &bad, &b, stream, entry, attempt, job);
		return;
	}
	al_result_free(&check);
	commit_encoded(w, res, &b, stream, entry, attempt, job);
}

/* Queue the encoded result b (taken) of res for its commit. */
static void commit_encoded(struct worker *w, const struct al_result *res, struct al_buf *bp,
			   const char *stream, const char *entry, long attempt,
			   const struct al_job *job)
{
	const char *callback = job ? job->callback_url : NULL;
	struct al_buf b = *bp;
	struct commit *c;

	c = calloc(1, sizeof(*c));
	if (!c || (callback && !(c->callback = strdup(callback)))) {
		al_log("error", "out_of_memory",
		       "job=%s what=commit note=\"the lease will re-deliver\"", res->id);
		free(c);
		al_buf_free(&b);
		return;
	}
	snprintf(c->id, sizeof(c->id), "%s", res->id);
	snprintf(c->tenant, sizeof(c->tenant), "%s", job && job->tenant ? job->tenant : "default");
	snprintf(c->stream, sizeof(c->stream), "%s", stream ? stream : "");
	snprintf(c->entry, sizeof(c->entry), "%s", entry ? entry : "");
	c->status = res->status;
	c->attempt = attempt;
	c->result = b.data; /* moved */
	c->len = b.len;
	*w->commits_tail = c;
	w->commits_tail = &c->next;
	wk_pass_want(w, WK_PASS_FLUSH);
}

/* A result written by the worker for a job it did not run (attempt 0 in
 * the result; the claimed attempt fences the commit). */
void wk_commit_status(struct worker *w, const char *id, const char *stream, const char *entry,
		      long attempt, enum al_status_code st, const char *msg)
{
	struct al_result res = {0};

	res.version = AL_PROTO_VERSION;
	res.id = (char *)id;
	res.attempt = 0;
	res.status = st;
	res.error = (char *)msg;
	res.worker = (char *)w->conf->backend.worker_id;
	res.finished_ms = al_now_ms();
	wk_commit_result(w, &res, stream, entry, attempt, NULL);
}

/* Re-queue through the delayed set (bump: count an attempt). */
void wk_retry_later(struct worker *w, struct slot *s, uint64_t delay_ms, bool bump)
{
	struct al_call c;

	al_retry_call(&c, &(struct al_retry_item){.id = s->id,
						  .stream = s->stream,
						  .entry = s->entry,
						  .group = AL_GROUP_WORKERS,
						  .attempt = s->attempt,
						  .due_ms = al_now_ms() + delay_ms,
						  .bump = bump});
	wk_send_call(w, &c, "retry", s->id);
}

void wk_ack(struct worker *w, const char *stream, const char *entry, const char *id)
{
	struct al_call c;

	al_xack_call(&c, stream, AL_GROUP_WORKERS, entry);
	wk_send_call(w, &c, "ack", id);
}

void wk_dead_letter(struct worker *w, const char *stream, const char *entry, const char *reason,
		    const char *id, const char *raw, size_t rawlen)
{
	struct al_call c;

	al_dlq_call(&c, w->policy.dlq_max_len, reason, stream, entry, id, raw, rawlen);
	al_log("warn", "dead_letter", "stream=%s entry=%s job=%s reason=\"%s\"", stream, entry,
	       id ? id : "-", reason);
	wk_send_call(w, &c, "dlq", id);
	wk_ack(w, stream, entry, id);
}
