/* service.c - the worker service (see service.h).
 *
 * Three Redis connections on one libevent loop: "cmd" for scripts and
 * heartbeats, "fetch" for the blocking XREADGROUP, "sub" for the cancel
 * channel. Results wait in a commit queue until Redis acknowledges them, so
 * a job that finishes during an outage is committed when Redis returns; the
 * COMMIT script's attempt check makes a late or repeated commit harmless.
 */
#include "service.h"

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
#include "runner.h"
#include "webhook.h"

#define FETCH_BLOCK_MS "1000"
#define FETCH_DEPTH 2 /* fetch scripts in flight at once: Redis works while the worker does */
#define MAX_STREAMS (AL_MAX_TIERS * AL_BANDS)

struct worker;

/* A backend has conf->slots slots that run jobs and, after them,
 * conf->prefetch places that only hold a claimed job (fetched ahead with
 * --prefetch) until a slot of the backend frees. Both are struct slot. */
struct slot {
	struct worker *w;
	int index;			 /* slot number within its backend (places: >= slots) */
	const struct al_backend_ops *ops;
	struct backend_state *be;
	bool busy;
	bool waiting;			 /* a place holding a claimed job */
	uint64_t held_ms;		 /* since when */
	uint64_t seq;			 /* order of arrival among held jobs */
	/* the job in this slot */
	char id[AL_ID_MAX + 1];
	char stream[AL_KEY_MAX];
	char entry[64];
	unsigned attempt;
	const struct al_tier_policy *tier;
	struct al_job job;
	bool have_job;
	struct al_runner *runner;
	bool released;			 /* drain gave it back: retry, do not commit */
};

struct backend_state {
	const struct al_backend_ops *ops;
	bool ok;			 /* self-check passed */
	char why[AL_ERR_MSG_MAX];	 /* why not */
	struct slot *slots;		 /* conf->slots slots, then conf->prefetch places */
	bool hold_off;			 /* a held job went back: fetch no more ahead until a slot frees */
};

/* A finished job's result, kept until a COMMIT answer says committed,
 * stale or duplicate. */
struct commit {
	struct commit *next;
	char id[AL_ID_MAX + 1];
	long attempt;		/* the fencing number it was claimed with */
	char *result;		/* msgpack result */
	size_t len;
	char stream[AL_KEY_MAX]; /* the entry to acknowledge ("" when none) */
	char entry[64];
	char status[24];
	char *callback;		/* POST the result here once committed, or NULL */
};

/* Queue-wait and run-time histograms, summed here and added to Redis at
 * each heartbeat (al:hist:<tier>:<backend>), off the per-job path. */
#define HIST_BOUNDS 13
static const unsigned hist_bounds[HIST_BOUNDS] = { 5, 10, 25, 50, 100, 250, 500, 1000, 2500,
						   5000, 10000, 30000, 60000 };
struct hist {
	char key[AL_KEY_MAX];			/* al:hist:<tier>:<backend> */
	uint64_t n[2][HIST_BOUNDS + 1];		/* [wait/run][bucket], last = +Inf */
	uint64_t sum_ms[2];
};

struct worker {
	const struct al_worker_conf *conf;
	struct al_policy policy;
	struct event_base *base;
	struct al_redis_url url;
	struct al_aconn *cmd, *fetch, *sub;
	struct backend_state backends[8];
	int nbackends;
	const char *streams[MAX_STREAMS];
	char stream_buf[MAX_STREAMS][AL_KEY_MAX];
	int nstreams;
	unsigned fetch_inflight;	/* fetch scripts on the command connection (<= FETCH_DEPTH) */
	unsigned fetch_reserved;	/* slots those may fill */
	bool block_fetching;	/* a blocking read on the fetch connection */
	bool draining;
	int exit_code;
	struct commit *commits, **commits_tail; /* results not sent yet */
	unsigned inflight;	/* reliable calls not answered yet */
	struct al_webhooks *hooks;
	struct event *flush_ev;	/* sends the commit queue once per loop pass */
	bool flush_armed;
	bool fetch_wanted;	/* slots freed in this pass: fetch after the flush */
	struct hist hists[16];
	int nhists;
	struct event *hb, *sigterm, *sigint, *grace;
	uint64_t jobs_done;
	uint64_t held_seq;
};

static void maybe_fetch(struct worker *w);
static void fetch_soon(struct worker *w);

/* Slots and places of a backend. */
static unsigned nplaces(const struct worker *w)
{
	return w->conf->slots + w->conf->prefetch;
}

static bool is_place(const struct slot *s)
{
	return (unsigned)s->index >= s->w->conf->slots;
}

/* Slots running (or about to run) a job; first..last-1 of each backend. */
static unsigned count_busy(struct worker *w, unsigned first, unsigned last)
{
	unsigned n = 0;

	for (int b = 0; b < w->nbackends; b++)
		for (unsigned i = first; i < last; i++)
			n += w->backends[b].slots[i].busy;
	return n;
}

static unsigned busy_slots(struct worker *w)
{
	return count_busy(w, 0, w->conf->slots);
}

static unsigned held_jobs(struct worker *w)
{
	return count_busy(w, w->conf->slots, nplaces(w));
}

/* Nothing left to run, hold or send. */
static bool idle(struct worker *w)
{
	return !w->commits && !w->inflight && count_busy(w, 0, nplaces(w)) == 0;
}

/* Draining and idle: the loop may end. */
static void exit_if_idle(struct worker *w)
{
	if (w->draining && idle(w))
		event_base_loopexit(w->base, NULL);
}

static struct backend_state *backend_for(struct worker *w, const char *name)
{
	for (int b = 0; b < w->nbackends; b++)
		if (!strcmp(w->backends[b].ops->name, name))
			return &w->backends[b];
	return NULL;
}

/* ---- what must reach Redis ----
 *
 * Every call that changes a job's fate (commit, retry, dead letter, ack)
 * is a reliable call of the command connection (common/aconn.h): kept and
 * sent again after a reset until Redis gives a definite answer. Results
 * wait in w->commits until the end of the loop pass, so that results
 * finishing together go out in one COMMIT call. */

/* A reliable call in flight: what to log when it is answered. */
struct call_ctx {
	struct worker *w;
	char what[16];
	char id[AL_ID_MAX + 1];
};

static void call_answered(struct worker *w)
{
	w->inflight--;
	exit_if_idle(w);
}

static void on_call(redisAsyncContext *ac, void *reply, void *priv)
{
	struct call_ctx *q = priv;
	struct worker *w = q->w;
	redisReply *r = reply;

	(void)ac;
	if (!r)
		al_log("warn", "unsent", "job=%s what=%s note=\"Redis did not confirm; the lease will re-deliver\"",
		       q->id, q->what);
	else if (r->type == REDIS_REPLY_ERROR)
		al_log("error", "redis_script", "what=%s job=%s error=\"%s\"", q->what, q->id, r->str);
	else if (r->type == REDIS_REPLY_INTEGER && r->integer == AL_RETRY_STALE && !strcmp(q->what, "retry"))
		al_log("warn", "stale_attempt", "what=%s job=%s note=\"lease was taken over; refused\"",
		       q->what, q->id);
	free(q);
	call_answered(w);
}

/* Send call (taken over) reliably; what and id name it in logs. */
static void send_call(struct worker *w, struct al_call *call, const char *what, const char *id)
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
		al_log("error", "out_of_memory", "job=%s what=%s", q->id, what);
		free(q);
		return;
	}
	w->inflight++;
}

static void commit_free(struct commit *c)
{
	free(c->result);
	free(c->callback);
	free(c);
}

/* The result of one commit in a batch. */
static void commit_answered(struct worker *w, struct commit *c, redisReply *e)
{
	if (!e) {
		al_log("warn", "unsent", "job=%s what=commit note=\"Redis did not confirm; the lease will re-deliver\"",
		       c->id);
	} else if (e->type == REDIS_REPLY_ERROR) {
		al_log("error", "redis_script", "what=commit job=%s error=\"%s\"", c->id, e->str);
	} else if (e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_STALE) {
		al_log("warn", "stale_attempt", "what=commit job=%s attempt=%ld note=\"lease was taken over; result refused\"",
		       c->id, c->attempt);
	} else if (e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_EXISTS) {
		al_log("warn", "stale_attempt", "what=commit job=%s attempt=%ld note=\"a result exists (another attempt, or this one sent again); this one is dropped\"",
		       c->id, c->attempt);
	} else if (e->type == REDIS_REPLY_INTEGER && e->integer == AL_COMMIT_DONE && c->callback &&
		   w->hooks) {
		/* Only the committed result is announced, once; to the
		 * addresses the tier's policy (as it is now) allows. */
		char tier[AL_ID_MAX + 1];
		const struct al_tier_policy *t =
		    al_key_queue_tier(c->stream, tier, sizeof(tier)) ? al_policy_tier(&w->policy, tier)
								     : NULL;

		if (al_webhooks_post(w->hooks, c->callback, c->id, c->result, c->len,
				     t ? t->callback_hosts : NULL, t ? t->ncallback_hosts : 0))
			al_log("error", "webhook", "job=%s error=\"could not queue the callback\"", c->id);
	}
}

struct commit_batch {
	struct worker *w;
	int n;
	struct commit *c[];
};

static void on_commit_batch(redisAsyncContext *ac, void *reply, void *priv)
{
	struct commit_batch *b = priv;
	struct worker *w = b->w;
	redisReply *r = reply;
	bool each = r && r->type == REDIS_REPLY_ARRAY && (int)r->elements == b->n;

	(void)ac;
	for (int i = 0; i < b->n; i++) {
		commit_answered(w, b->c[i], each ? r->element[i] : r);
		commit_free(b->c[i]);
	}
	free(b);
	call_answered(w);
}

#define COMMIT_BATCH_MAX 64

/* Send the results waiting in w->commits, COMMIT_BATCH_MAX per call. */
static void flush_commits(struct worker *w)
{
	while (w->commits) {
		struct commit_batch *b = calloc(1, sizeof(*b) + COMMIT_BATCH_MAX * sizeof(struct commit *));
		struct al_call call;

		if (!b) {
			al_log("error", "out_of_memory", "what=commit note=\"results kept; tried again\"");
			return;
		}
		b->w = w;
		al_call_init(&call, al_lua_commit);
		while (w->commits && b->n < COMMIT_BATCH_MAX) {
			struct commit *c = w->commits;

			w->commits = c->next;
			if (!w->commits)
				w->commits_tail = &w->commits;
			b->c[b->n++] = c;
			al_commit_add(&call, &(struct al_commit_item){
						     .id = c->id, .attempt = c->attempt, .result = c->result,
						     .len = c->len, .ttl_ms = w->policy.result_ttl_ms,
						     .stream = c->stream, .entry = c->entry,
						     .group = AL_GROUP_WORKERS, .status = c->status });
		}
		if (al_aconn_call(w->cmd, &call, on_commit_batch, b)) {
			al_log("error", "out_of_memory", "what=commit jobs=%d", b->n);
			for (int i = 0; i < b->n; i++)
				commit_free(b->c[i]);
			free(b);
			continue;
		}
		w->inflight++;
	}
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	w->flush_armed = false;
	flush_commits(w);
	if (w->fetch_wanted) {
		w->fetch_wanted = false;
		maybe_fetch(w);
	}
}

/* Run on_flush at the end of this loop pass. */
static void arm_flush(struct worker *w)
{
	if (!w->flush_armed && w->flush_ev) {
		w->flush_armed = true;
		event_active(w->flush_ev, 0, 0);
	}
}

/* Fetch at the end of this loop pass, after the commits: every slot freed
 * in the pass counts in one fetch, which goes out behind the results. */
static void fetch_soon(struct worker *w)
{
	w->fetch_wanted = true;
	if (w->flush_ev)
		arm_flush(w);
	else
		maybe_fetch(w);
}

/* Commit res (the attempt fences it); callback (may be NULL) hears of it
 * once committed. The result is kept until Redis answers. */
static void commit_result(struct worker *w, const struct al_result *res, const char *stream,
			  const char *entry, long attempt, const char *callback)
{
	struct al_buf b = { 0 };
	struct al_err err = { 0 };
	struct commit *c;

	if (al_result_encode(res, &b, &err)) {
		al_log("error", "encode_result", "job=%s error=\"%s\"", res->id, err.msg);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || (callback && !(c->callback = strdup(callback)))) {
		al_log("error", "out_of_memory", "job=%s what=commit note=\"the lease will re-deliver\"", res->id);
		free(c);
		al_buf_free(&b);
		return;
	}
	snprintf(c->id, sizeof(c->id), "%s", res->id);
	snprintf(c->stream, sizeof(c->stream), "%s", stream ? stream : "");
	snprintf(c->entry, sizeof(c->entry), "%s", entry ? entry : "");
	snprintf(c->status, sizeof(c->status), "%s", al_status_name(res->status));
	c->attempt = attempt;
	c->result = b.data; /* moved */
	c->len = b.len;
	*w->commits_tail = c;
	w->commits_tail = &c->next;
	arm_flush(w);
}

/* A result written by the worker for a job it did not run (attempt 0 in
 * the result; the claimed attempt fences the commit). */
static void commit_status(struct worker *w, const char *id, const char *stream, const char *entry,
			  long attempt, enum al_status_code st, const char *msg)
{
	struct al_result res = { 0 };

	res.version = AL_PROTO_VERSION;
	res.id = (char *)id;
	res.attempt = 0;
	res.status = st;
	res.error = (char *)msg;
	res.worker = (char *)w->conf->backend.worker_id;
	res.finished_ms = al_now_ms();
	commit_result(w, &res, stream, entry, attempt, NULL);
}

/* Re-queue through the delayed set (bump: count an attempt). */
static void retry_later(struct worker *w, struct slot *s, uint64_t delay_ms, bool bump)
{
	struct al_call c;

	al_retry_call(&c, &(struct al_retry_item){ .id = s->id, .stream = s->stream,
						    .entry = s->entry, .group = AL_GROUP_WORKERS,
						    .attempt = s->attempt,
						    .due_ms = al_now_ms() + delay_ms, .bump = bump });
	send_call(w, &c, "retry", s->id);
}

static void ack(struct worker *w, const char *stream, const char *entry, const char *id)
{
	struct al_call c;

	al_xack_call(&c, stream, AL_GROUP_WORKERS, entry);
	send_call(w, &c, "ack", id);
}

static void dead_letter(struct worker *w, const char *stream, const char *entry,
			const char *reason, const char *id, const char *raw, size_t rawlen)
{
	struct al_call c;

	al_dlq_call(&c, w->policy.dlq_max_len, reason, stream, entry, id, raw, rawlen);
	al_log("warn", "dead_letter", "stream=%s entry=%s job=%s reason=\"%s\"", stream, entry,
	       id ? id : "-", reason);
	send_call(w, &c, "dlq", id);
	ack(w, stream, entry, id);
}

static void dispatch_held(struct worker *w, struct backend_state *be);

static void slot_release(struct slot *s)
{
	struct worker *w = s->w;

	if (s->runner)
		al_runner_free(s->runner);
	s->runner = NULL;
	if (s->have_job)
		al_job_free(&s->job);
	s->have_job = false;
	s->busy = false;
	s->waiting = false;
	s->released = false;
	if (!is_place(s)) {
		s->be->hold_off = false;
		dispatch_held(w, s->be);
	}
	exit_if_idle(w);
	fetch_soon(w);
}

/* ---- running a job ---- */

static uint64_t backoff_ms(const struct al_tier_policy *t, unsigned attempt)
{
	uint64_t d = t->backoff_ms << (attempt > 10 ? 10 : attempt - 1);
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)al_now_ms();
	return d / 2 + (d ? r % d : 0); /* full jitter around d */
}

static void hist_add(struct worker *w, const char *tier, const char *backend, uint64_t wait_ms,
		     uint64_t run_ms)
{
	char key[AL_KEY_MAX];
	struct hist *h = NULL;
	uint64_t v[2] = { wait_ms, run_ms };

	al_key_hist(key, tier, backend);
	for (int i = 0; i < w->nhists && !h; i++)
		if (!strcmp(w->hists[i].key, key))
			h = &w->hists[i];
	if (!h) {
		if (w->nhists == (int)(sizeof(w->hists) / sizeof(w->hists[0])))
			return;
		h = &w->hists[w->nhists++];
		memset(h, 0, sizeof(*h));
		snprintf(h->key, sizeof(h->key), "%s", key);
	}
	for (int k = 0; k < 2; k++) {
		int b = 0;

		while (b < HIST_BOUNDS && v[k] > hist_bounds[b])
			b++;
		h->n[k][b]++;
		h->sum_ms[k] += v[k];
	}
}

static void hist_flush(struct worker *w)
{
	static const char *const kind[2] = { "wait", "run" };

	for (int i = 0; i < w->nhists; i++) {
		struct hist *h = &w->hists[i];

		for (int k = 0; k < 2; k++) {
			char field[32], val[24];

			for (int b = 0; b <= HIST_BOUNDS; b++) {
				if (!h->n[k][b])
					continue;
				if (b < HIST_BOUNDS)
					snprintf(field, sizeof(field), "%s_in_%u", kind[k], hist_bounds[b]);
				else
					snprintf(field, sizeof(field), "%s_in_inf", kind[k]);
				snprintf(val, sizeof(val), "%llu", (unsigned long long)h->n[k][b]);
				{
					const char *argv[] = { "HINCRBY", h->key, field, val };

					if (al_aconn_cmd(w->cmd, NULL, NULL, 4, argv, NULL) == 0)
						h->n[k][b] = 0;
				}
			}
			if (h->sum_ms[k]) {
				const char *argv[] = { "HINCRBY", h->key, field, val };

				snprintf(field, sizeof(field), "%s_sum_ms", kind[k]);
				snprintf(val, sizeof(val), "%llu", (unsigned long long)h->sum_ms[k]);
				if (al_aconn_cmd(w->cmd, NULL, NULL, 4, argv, NULL) == 0)
					h->sum_ms[k] = 0;
			}
		}
	}
}

static const char *info_of(const struct al_result *res, const char *key)
{
	for (size_t i = 0; i < res->ninfo; i++)
		if (!strcmp(res->info[i].key, key))
			return res->info[i].value;
	return NULL;
}

/* A service VM that is up: its lease goes into Redis before the result
 * (al:vm:<name> and the al:vm:leases index the scheduler ends it by). A
 * worker that dies in between leaves a leased VM that serves nobody until
 * its lease ends; the other order would leave a result naming a VM that
 * reconciliation destroys. */
static void record_vm_lease(struct worker *w, struct slot *s, const struct al_result *res)
{
	const char *name = info_of(res, "vm_name"), *exp = info_of(res, "lease_expires_ms");
	const char *max = info_of(res, "lease_max_ms"), *ip = info_of(res, "vm_ip");
	const char *ports = info_of(res, "ports");
	char key[AL_KEY_MAX], now[24];

	if (!name || !exp || !max || !ip)
		return;
	snprintf(now, sizeof(now), "%llu", (unsigned long long)al_now_ms());
	{
		const char *kv[] = { "job", s->id, "tier", s->tier->name, "worker",
				     w->conf->backend.worker_id, "ip", ip, "ports", ports ? ports : "",
				     "created_ms", now, "expires_ms", exp, "max_until_ms", max,
				     "state", "running" };
		struct al_call c;

		al_call_init(&c, NULL);
		al_call_str(&c, "HSET");
		al_call_str(&c, al_key_vm(key, name));
		for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
			al_call_str(&c, kv[i]);
		send_call(w, &c, "vm_lease", s->id);
		al_call_init(&c, NULL);
		al_call_str(&c, "ZADD");
		al_call_str(&c, AL_KEY_VM_LEASES);
		al_call_str(&c, exp);
		al_call_str(&c, name);
		send_call(w, &c, "vm_lease", s->id);
	}
	al_log("info", "vm_up", "job=%s vm=%s ip=%s ports=%s lease_expires_ms=%s", s->id, name, ip,
	       ports ? ports : "", exp);
}

static void on_job_done(struct al_runner *r, struct al_result *res, void *arg)
{
	struct slot *s = arg;
	struct worker *w = s->w;

	(void)r;
	res->queued_ms = s->job.submitted_ms;
	al_log("info", "job_done",
	      "job=%s attempt=%u tier=%s backend=%s slot=%d status=%s exit=%d signal=%d wall_ms=%llu cpu_ms=%llu queue_ms=%lld%s%s%s",
	      s->id, s->attempt, s->tier->name, s->ops->name, s->index, al_status_name(res->status),
	      res->has_exit_code ? res->exit_code : -1, res->signal, (unsigned long long)res->wall_ms,
	      (unsigned long long)res->cpu_ms,
	      (long long)(res->started_ms - (res->queued_ms ? res->queued_ms : res->started_ms)),
	      res->error ? " error=\"" : "", res->error ? res->error : "", res->error ? "\"" : "");
	hist_add(w, s->tier->name, s->ops->name,
		 res->queued_ms && res->started_ms > res->queued_ms ? res->started_ms - res->queued_ms : 0,
		 res->wall_ms);
	if (s->released) {
		/* Drained: give it back for another worker, same attempt. */
		retry_later(w, s, 0, false);
	} else if (res->status == AL_ST_SANDBOX_ERROR && s->attempt < s->job.max_attempts) {
		retry_later(w, s, backoff_ms(s->tier, s->attempt), true);
	} else {
		if ((s->ops->caps & AL_CAP_SERVICE) && res->status == AL_ST_OK)
			record_vm_lease(w, s, res);
		commit_result(w, res, s->stream, s->entry, (long)s->attempt,
			      s->job.callback_url);
	}
	w->jobs_done++;
	slot_release(s);
}

/* Decode a claimed job into s and check it; false when that ended it. */
static bool job_accept(struct worker *w, struct slot *s, const char *raw, size_t rawlen)
{
	struct al_err err = { 0 };

	if (al_job_decode(raw, rawlen, &s->job, &err)) {
		dead_letter(w, s->stream, s->entry, err.msg, s->id, raw, rawlen);
		commit_status(w, s->id, s->stream, s->entry, (long)s->attempt, AL_ST_REJECTED,
			      err.msg);
		slot_release(s);
		return false;
	}
	s->have_job = true;
	/* Defence in depth: the worker re-checks the job against its own copy
	 * of the policy (deadline 0: the claim already checked it). */
	if (al_policy_admit(&w->policy, &s->job, 0, &err)) {
		commit_status(w, s->id, s->stream, s->entry, (long)s->attempt, AL_ST_REJECTED,
			      err.msg);
		slot_release(s);
		return false;
	}
	return true;
}

/* Run the accepted job of slot s on its tier's backend. */
static void job_run(struct worker *w, struct slot *s)
{
	struct backend_state *be = backend_for(w, s->tier->backend);
	struct al_run_spec spec = { 0 };
	char why[AL_ERR_MSG_MAX + 64];

	if (!be || !be->ok) {
		snprintf(why, sizeof(why), "backend %s unavailable on worker %s: %s", s->tier->backend,
			 w->conf->backend.worker_id, be ? be->why : "not built in");
		al_log("error", "backend_unavailable", "job=%s tier=%s %s", s->id, s->tier->name, why);
		commit_result(w, &(struct al_result){ .version = AL_PROTO_VERSION, .id = s->id,
						      .attempt = s->attempt,
						      .status = AL_ST_SANDBOX_ERROR, .error = why },
			      s->stream, s->entry, (long)s->attempt, s->job.callback_url);
		slot_release(s);
		return;
	}
	spec.job = &s->job;
	spec.limits = s->job.limits;
	spec.cpu_millis = s->tier->cpu_millis;
	spec.env = s->tier->env;
	spec.nenv = s->tier->nenv;
	spec.network = s->job.network;
	spec.image = s->tier->image;
	spec.binds = s->tier->binds;
	spec.nbinds = s->tier->nbinds;
	spec.slot = (unsigned)s->index;
	spec.attempt = s->attempt;
	spec.vm_network = s->tier->vm_network;
	spec.ports = s->tier->ports;
	spec.nports = s->tier->nports;
	spec.lease_ms = s->tier->lease_ms;
	spec.max_lease_ms = s->tier->max_lease_ms;
	s->runner = al_runner_start(w->base, s->ops, &w->conf->backend, &spec, on_job_done, s);
	if (!s->runner) {
		al_log("error", "out_of_memory", "job=%s", s->id);
		slot_release(s);
		return;
	}
	al_log("info", "job_start", "job=%s attempt=%u tier=%s backend=%s slot=%d", s->id, s->attempt,
	      s->tier->name, s->ops->name, s->index);
}

/* Run held job of place p in free slot s. */
static void run_held(struct worker *w, struct slot *p, struct slot *s)
{
	s->busy = true;
	s->tier = p->tier;
	s->attempt = p->attempt;
	memcpy(s->id, p->id, sizeof(s->id));
	memcpy(s->stream, p->stream, sizeof(s->stream));
	memcpy(s->entry, p->entry, sizeof(s->entry));
	s->job = p->job; /* moved */
	s->have_job = true;
	p->have_job = false;
	p->busy = false;
	p->waiting = false;
	if (s->job.deadline_ms && al_now_ms() > s->job.deadline_ms) {
		commit_status(w, s->id, s->stream, s->entry, (long)s->attempt,
			      AL_ST_EXPIRED, "not started before its deadline");
		slot_release(s);
		return;
	}
	job_run(w, s);
}

/* Start held jobs of backend be in its free slots, oldest first. */
static void dispatch_held(struct worker *w, struct backend_state *be)
{
	while (!w->draining) {
		struct slot *s = NULL, *p = NULL;

		for (unsigned i = 0; i < w->conf->slots && !s; i++)
			if (!be->slots[i].busy)
				s = &be->slots[i];
		for (unsigned i = w->conf->slots; s && i < nplaces(w); i++)
			if (be->slots[i].waiting && (!p || be->slots[i].seq < p->seq))
				p = &be->slots[i];
		if (!p)
			return;
		run_held(w, p, s);
	}
}

/* Put the job of place p back in its queue for any worker, same attempt. */
static void give_back(struct worker *w, struct slot *p)
{
	retry_later(w, p, 0, false);
	slot_release(p);
}

/* Place p got its job: hold it until a slot frees (at once if one is free). */
static void hold(struct worker *w, struct slot *p)
{
	if (w->draining) {
		give_back(w, p);
		return;
	}
	p->waiting = true;
	p->held_ms = al_now_ms();
	p->seq = ++w->held_seq;
	dispatch_held(w, p->be);
}

/* What the claim of one entry said: code (CLAIM's codes; -99: no answer)
 * and, for 1, -3 and -4, the job bytes. */
static void claim_done(struct slot *s, long long code, const char *job, size_t joblen)
{
	struct worker *w = s->w;

	switch (code) {
	case AL_CLAIM_RUN:
		if (!job) {
			slot_release(s);
			return;
		}
		if (!job_accept(w, s, job, joblen))
			return;
		if (is_place(s))
			hold(w, s);
		else
			job_run(w, s);
		return;
	case AL_CLAIM_CANCELLED:
	case AL_CLAIM_EXPIRED:
		(void)job;
		(void)joblen;
		commit_status(w, s->id, s->stream, s->entry, (long)s->attempt,
			      code == AL_CLAIM_CANCELLED ? AL_ST_CANCELLED : AL_ST_EXPIRED,
			      code == AL_CLAIM_CANCELLED ? "cancelled by a client before it started"
							 : "not started before its deadline");
		break;
	case AL_CLAIM_TENANT_FULL:
		/* Tenant at its running cap: try again a little later. */
		retry_later(w, s, 250, false);
		break;
	case AL_CLAIM_UNKNOWN:
		dead_letter(w, s->stream, s->entry, "no such job (its record is missing)", s->id, NULL, 0);
		break;
	case -99:
		/* No answer: the entry stays pending in our name and the lease
		 * brings it back. */
		break;
	default:
		/* finished already or a stale duplicate: just acknowledge */
		ack(w, s->stream, s->entry, s->id);
	}
	slot_release(s);
}

/* Find a free slot (else place) whose backend serves tier. */
static struct slot *free_slot_for(struct worker *w, const struct al_tier_policy *t)
{
	struct backend_state *be = backend_for(w, t->backend);

	if (!be) /* unavailable backend: any free slot reports the failure */
		be = &w->backends[0];
	for (unsigned i = 0; i < nplaces(w); i++)
		if (!be->slots[i].busy)
			return &be->slots[i];
	return NULL;
}

/* Check a fetched entry and reserve a slot for it; NULL when it was
 * dead-lettered or no slot is free. */
static struct slot *handle_entry(struct worker *w, const char *stream, redisReply *e)
{
	char tier[AL_ID_MAX + 1];
	const char *id = NULL, *attempt = NULL;
	const struct al_tier_policy *t;
	struct slot *s;

	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING)
		return NULL;
	if (e->element[1]->type == REDIS_REPLY_ARRAY) {
		for (size_t k = 0; k + 1 < e->element[1]->elements; k += 2) {
			redisReply *key = e->element[1]->element[k], *val = e->element[1]->element[k + 1];

			if (key->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING)
				continue;
			if (!strcmp(key->str, "id"))
				id = val->str;
			else if (!strcmp(key->str, "attempt"))
				attempt = val->str;
		}
	}
	t = al_key_queue_tier(stream, tier, sizeof(tier)) ? al_policy_tier(&w->policy, tier) : NULL;
	if (!id || !attempt || !al_job_id_ok(id, strlen(id)) || atoi(attempt) < 1 || !t) {
		dead_letter(w, stream, e->element[0]->str,
			    !t ? "entry in the queue of a tier this worker's policy does not know"
			       : "malformed queue entry: needs id and attempt fields",
			    NULL, NULL, 0);
		return NULL;
	}
	s = free_slot_for(w, t);
	if (!s) {
		/* More entries than slots (should not happen): leave it pending;
		 * the lease returns it to the queue. */
		al_log("warn", "no_free_slot", "job=%s", id);
		return NULL;
	}
	s->busy = true;
	s->tier = t;
	s->attempt = (unsigned)atoi(attempt);
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->stream, sizeof(s->stream), "%s", stream);
	snprintf(s->entry, sizeof(s->entry), "%s", e->element[0]->str);
	return s;
}

/* The slots of one CLAIM call, in the order of its keys. */
struct claim_batch {
	int n;
	struct slot *slots[];
};

static void on_claim(redisAsyncContext *ac, void *reply, void *priv)
{
	struct claim_batch *b = priv;
	redisReply *r = reply;
	bool ok = r && r->type == REDIS_REPLY_ARRAY && (int)r->elements == b->n;

	(void)ac;
	if (r && r->type == REDIS_REPLY_ERROR)
		al_log("error", "claim", "jobs=%d error=\"%s\"", b->n, r->str);
	/* No or odd reply: the entries stay pending in our name and the lease
	 * brings them back. */
	for (int i = 0; i < b->n; i++) {
		redisReply *e = ok ? r->element[i] : NULL;
		bool good = e && e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
			    e->element[0]->type == REDIS_REPLY_INTEGER;
		bool has_job = good && e->elements >= 2 && e->element[1]->type == REDIS_REPLY_STRING;

		claim_done(b->slots[i], good ? e->element[0]->integer : -99,
			   has_job ? e->element[1]->str : NULL, has_job ? e->element[1]->len : 0);
	}
	free(b);
}

/* CLAIM is a reliable call: the script answers a repeated claim of the
 * same attempt by the same worker as the first. */
static void claim_send(struct worker *w, struct claim_batch *b)
{
	struct al_call c;

	al_claim_init(&c, w->conf->backend.worker_id, al_now_ms());
	for (int i = 0; i < b->n; i++)
		al_claim_add(&c, b->slots[i]->id, b->slots[i]->attempt);
	if (al_aconn_call(w->cmd, &c, on_claim, b)) {
		for (int i = 0; i < b->n; i++)
			b->slots[i]->busy = false; /* stays pending; the lease returns it */
		free(b);
	}
}

static void on_fetch(redisAsyncContext *ac, void *reply, void *priv)
{
	struct worker *w = priv;
	redisReply *r = reply;

	(void)ac;
	w->block_fetching = false;
	if (r && r->type == REDIS_REPLY_ERROR) {
		/* NOGROUP: the scheduler has not made this tier's queue yet */
		if (!strncmp(r->str, "NOGROUP", 7)) {
			for (int i = 0; i < w->nstreams; i++) {
				const char *argv[] = { "XGROUP", "CREATE", w->streams[i], AL_GROUP_WORKERS,
						       "0", "MKSTREAM" };

				al_aconn_cmd(w->cmd, NULL, NULL, 6, argv, NULL);
			}
		} else {
			al_log("error", "fetch", "error=\"%s\"", r->str);
		}
	}
	if (r && r->type == REDIS_REPLY_ARRAY && w->draining) {
		/* A read that was waiting when the drain began: these entries are
		 * ours but unclaimed; put them back at the queue's end, at once
		 * (one script: acknowledged and re-added together). */
		for (size_t i = 0; i < r->elements; i++) {
			redisReply *st = r->element[i];

			if (st->type != REDIS_REPLY_ARRAY || st->elements != 2)
				continue;
			for (size_t j = 0; j < st->element[1]->elements; j++) {
				redisReply *e = st->element[1]->element[j];
				struct al_call c;

				if (e->type != REDIS_REPLY_ARRAY || e->elements != 2)
					continue;
				al_give_back_call(&c, st->element[0]->str, AL_GROUP_WORKERS,
						  e->element[0]->str);
				send_call(w, &c, "give-back", "-");
			}
		}
		return;
	}
	if (r && r->type == REDIS_REPLY_ARRAY) {
		/* Streams come back in the order asked: high band first. One
		 * CLAIM call covers every entry of this read. */
		size_t total = 0;
		struct claim_batch *b;

		for (size_t i = 0; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_ARRAY && r->element[i]->elements == 2)
				total += r->element[i]->element[1]->elements;
		b = calloc(1, sizeof(*b) + (total + 1) * sizeof(struct slot *));
		for (size_t i = 0; b && i < r->elements; i++) {
			redisReply *st = r->element[i];

			if (st->type != REDIS_REPLY_ARRAY || st->elements != 2)
				continue;
			for (size_t j = 0; j < st->element[1]->elements; j++) {
				struct slot *sl = handle_entry(w, st->element[0]->str,
							       st->element[1]->element[j]);

				if (sl)
					b->slots[b->n++] = sl;
			}
		}
		if (b && b->n)
			claim_send(w, b);
		else
			free(b);
	}
	if (r)
		maybe_fetch(w);
}

/* The smallest number of free slots (and places, unless held off) over
 * the backends: FETCH may hand back a job of any tier served, so each must
 * find one. */
static unsigned fetch_count(struct worker *w)
{
	unsigned min = ~0u;

	for (int b = 0; b < w->nbackends; b++) {
		unsigned n = 0;

		for (unsigned i = 0; i < (w->backends[b].hold_off ? w->conf->slots : nplaces(w)); i++)
			n += !w->backends[b].slots[i].busy;
		if (n < min)
			min = n;
	}
	min = w->nbackends && min > w->fetch_reserved ? min - w->fetch_reserved : 0;
	/* at most half the slots and places per fetch: while the worker
	 * starts one batch, Redis already works on the next */
	if (min > (nplaces(w) + 1) / 2)
		min = (nplaces(w) + 1) / 2;
	return min;
}

static void block_fetch(struct worker *w);

struct fetch_req {
	struct worker *w;
	unsigned n; /* slots reserved for its entries */
};

static void on_fetch_script(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fetch_req *q = priv;
	struct worker *w = q->w;
	redisReply *r = reply;
	size_t got = 0;

	(void)ac;
	w->fetch_inflight--;
	w->fetch_reserved -= q->n;
	free(q);
	if (!r)
		return; /* connection lost; fetching resumes when it is back */
	if (r->type == REDIS_REPLY_ERROR) {
		/* a reset follows a transient error: fetching resumes when up */
		if (!al_aconn_transient(r))
			al_log("error", "fetch", "error=\"%s\"", r->str);
	} else if (r->type == REDIS_REPLY_ARRAY) {
		got = r->elements;
		for (size_t i = 0; i < r->elements; i++) {
			redisReply *e = r->element[i];
			const char *stream, *entry;
			char tier[AL_ID_MAX + 1];
			const struct al_tier_policy *t;
			struct slot *s;

			if (e->type != REDIS_REPLY_ARRAY || e->elements < 5)
				continue;
			stream = e->element[0]->str;
			entry = e->element[1]->str;
			if (e->element[4]->integer == AL_CLAIM_MALFORMED) {
				dead_letter(w, stream, entry, "malformed queue entry: needs id and attempt fields",
					    NULL, NULL, 0);
				continue;
			}
			t = al_key_queue_tier(stream, tier, sizeof(tier)) ? al_policy_tier(&w->policy, tier)
									  : NULL;
			s = t ? free_slot_for(w, t) : NULL;
			if (!s) { /* cannot happen with fetch_count; the lease repairs it */
				al_log("error", "no_free_slot", "job=%s", e->element[2]->str);
				continue;
			}
			s->busy = true;
			s->tier = t;
			s->attempt = (unsigned)atoi(e->element[3]->str);
			snprintf(s->id, sizeof(s->id), "%s", e->element[2]->str);
			snprintf(s->stream, sizeof(s->stream), "%s", stream);
			snprintf(s->entry, sizeof(s->entry), "%s", entry);
			claim_done(s, e->element[4]->integer,
				   e->elements >= 6 && e->element[5]->type == REDIS_REPLY_STRING
					   ? e->element[5]->str
					   : NULL,
				   e->elements >= 6 ? e->element[5]->len : 0);
		}
	}
	if (got)
		maybe_fetch(w);   /* more may be waiting */
	else if (!w->fetch_inflight)
		block_fetch(w);	  /* nothing waits: block until something does */
}

/* A fetch may go out: no blocking read waiting, fewer than FETCH_DEPTH
 * fetch scripts in flight, not draining, free slots nobody reserved, both
 * connections up. */
static bool can_fetch(const struct worker *w, unsigned n)
{
	return !w->block_fetching && w->fetch_inflight < FETCH_DEPTH && !w->draining && n > 0 &&
	       al_aconn_is_up(w->fetch) && al_aconn_is_up(w->cmd);
}

/* Non-blocking read and claim in one script call on the command connection;
 * when the queues are empty, block_fetch waits on the fetch connection. */
static void maybe_fetch(struct worker *w)
{
	unsigned n = fetch_count(w);
	struct fetch_req *q;
	struct al_call c;

	if (!can_fetch(w, n) || !(q = malloc(sizeof(*q))))
		return;
	*q = (struct fetch_req){ w, n };
	al_fetch_call(&c, w->streams, w->nstreams, w->conf->backend.worker_id, al_now_ms(), n);
	if (al_aconn_send(w->cmd, &c, on_fetch_script, q)) {
		free(q);
	} else {
		w->fetch_inflight++;
		w->fetch_reserved += n;
	}
	al_call_free(&c);
}

static void block_fetch(struct worker *w)
{
	const char *argv[8 + 2 * MAX_STREAMS];
	char count[16];
	unsigned n = fetch_count(w);
	int argc = 0;

	if (w->fetch_inflight || !can_fetch(w, n))
		return;
	snprintf(count, sizeof(count), "%u", n);
	argv[argc++] = "XREADGROUP";
	argv[argc++] = "GROUP";
	argv[argc++] = AL_GROUP_WORKERS;
	argv[argc++] = w->conf->backend.worker_id;
	argv[argc++] = "COUNT";
	argv[argc++] = count;
	argv[argc++] = "BLOCK";
	argv[argc++] = FETCH_BLOCK_MS;
	argv[argc++] = "STREAMS";
	for (int i = 0; i < w->nstreams; i++)
		argv[argc++] = w->streams[i];
	for (int i = 0; i < w->nstreams; i++)
		argv[argc++] = ">";
	if (al_aconn_cmd(w->fetch, on_fetch, w, argc, argv, NULL) == 0)
		w->block_fetching = true;
}

/* ---- cancel, heartbeat, connections ---- */

/* Cancel the job of s: stop it if it runs; end it if it is held. */
static void cancel_slot(struct worker *w, struct slot *s)
{
	if (s->runner) {
		al_log("info", "cancel", "job=%s slot=%d", s->id, s->index);
		al_runner_stop(s->runner, AL_ST_CANCELLED, "cancelled by a client while running");
	} else if (s->waiting) {
		al_log("info", "cancel", "job=%s held=yes", s->id);
		commit_status(w, s->id, s->stream, s->entry, (long)s->attempt,
			      AL_ST_CANCELLED, "cancelled by a client before it started");
		slot_release(s);
	}
}

static void cancel_job(struct worker *w, const char *id)
{
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = 0; i < nplaces(w); i++) {
			struct slot *s = &w->backends[b].slots[i];

			if (s->busy && !strcmp(s->id, id))
				cancel_slot(w, s);
		}
	}
}

static void on_cancel_msg(redisAsyncContext *ac, void *reply, void *priv)
{
	struct worker *w = priv;
	redisReply *r = reply;

	(void)ac;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") ||
	    r->element[2]->type != REDIS_REPLY_STRING)
		return;
	cancel_job(w, r->element[2]->str);
}

/* A heartbeat's look at a job's cancel flag; the slot may hold another
 * job by the time the answer comes. */
struct flag_req {
	struct slot *s;
	char id[AL_ID_MAX + 1];
};

static void on_cancel_flag(redisAsyncContext *ac, void *reply, void *priv)
{
	struct flag_req *q = priv;
	struct slot *s = q->s;
	redisReply *r = reply;

	(void)ac;
	if (r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, "1") && s->busy &&
	    !strcmp(s->id, q->id))
		cancel_slot(s->w, s);
	free(q);
}

static void heartbeat(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	char alive[AL_KEY_MAX], ttl[24], desc[512];
	struct timeval tv = { (time_t)(w->conf->heartbeat_ms / 1000),
			      (suseconds_t)(w->conf->heartbeat_ms % 1000) * 1000 };
	int n = 0;

	(void)fd;
	(void)what;
	evtimer_add(w->hb, &tv);
	for (int b = 0; b < w->nbackends; b++)
		if (w->backends[b].ok && w->backends[b].ops->tick)
			w->backends[b].ops->tick(&w->conf->backend);
	if (!al_aconn_is_up(w->cmd))
		return;
	al_key_worker(alive, w->conf->backend.worker_id);
	snprintf(ttl, sizeof(ttl), "%llu", (unsigned long long)(w->conf->heartbeat_ms * 3));
	n += snprintf(desc + n, sizeof(desc) - (size_t)n,
		      "{\"pid\":%d,\"slots\":%u,\"busy\":%u,\"held\":%u,\"draining\":%s,\"done\":%llu,\"backends\":[",
		      (int)getpid(), (unsigned)w->nbackends * w->conf->slots, busy_slots(w),
		      held_jobs(w), w->draining ? "true" : "false", (unsigned long long)w->jobs_done);
	for (int b = 0; b < w->nbackends && n < (int)sizeof(desc) - 64; b++)
		n += snprintf(desc + n, sizeof(desc) - (size_t)n, "%s\"%s%s\"", b ? "," : "",
			      w->backends[b].ops->name, w->backends[b].ok ? "" : "(unavailable)");
	snprintf(desc + n, sizeof(desc) - (size_t)n, "]}");
	{
		const char *set[] = { "SET", alive, "1", "PX", ttl };
		const char *reg[] = { "HSET", AL_KEY_WORKERS, w->conf->backend.worker_id, desc };

		al_aconn_cmd(w->cmd, NULL, NULL, 5, set, NULL);
		al_aconn_cmd(w->cmd, NULL, NULL, 4, reg, NULL);
	}
	hist_flush(w);
	/* Renew the lease on each running or held job; poll its cancel flag
	 * in case a pub/sub message was missed. A job held too long (the
	 * slots' jobs outlast it) goes back to the queue for other workers. */
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = 0; i < nplaces(w); i++) {
			struct slot *s = &w->backends[b].slots[i];
			char jobkey[AL_KEY_MAX];
			struct flag_req *q;

			if (!s->busy || (!s->runner && !s->waiting))
				continue;
			if (s->waiting && al_now_ms() - s->held_ms >= AL_HOLD_MAX_MS) {
				al_log("info", "give_back", "job=%s held_ms=%llu note=\"no slot freed; back to the queue\"",
				       s->id, (unsigned long long)(al_now_ms() - s->held_ms));
				s->be->hold_off = true;
				give_back(w, s);
				continue;
			}
			{
				const char *claim[] = { "XCLAIM", s->stream, AL_GROUP_WORKERS,
							w->conf->backend.worker_id, "0", s->entry,
							"JUSTID" };
				const char *flag[] = { "HGET", jobkey, "cancel" };

				al_key_job(jobkey, s->id);
				al_aconn_cmd(w->cmd, NULL, NULL, 7, claim, NULL);
				q = malloc(sizeof(*q));
				if (!q)
					continue;
				q->s = s;
				memcpy(q->id, s->id, sizeof(q->id));
				if (al_aconn_cmd(w->cmd, on_cancel_flag, q, 3, flag, NULL))
					free(q);
			}
		}
	}
}

static void on_cmd_up(struct al_aconn *c, void *arg)
{
	struct worker *w = arg;

	(void)c;
	al_log("info", "redis_up", "conn=cmd worker=%s", w->conf->backend.worker_id);
	for (int i = 0; i < w->nstreams; i++) {
		const char *argv[] = { "XGROUP", "CREATE", w->streams[i], AL_GROUP_WORKERS, "0",
				       "MKSTREAM" };

		al_aconn_cmd(w->cmd, NULL, NULL, 6, argv, NULL);
	}
	heartbeat(-1, 0, w);
	flush_commits(w);
	maybe_fetch(w);
}

static void on_conn_down(struct al_aconn *c, void *arg)
{
	struct worker *w = arg;

	if (c == w->fetch)
		w->block_fetching = false;
	al_log("warn", "redis_down", "conn=%s note=\"reconnecting; results are kept until committed\"",
	      c == w->cmd ? "cmd" : c == w->fetch ? "fetch" : "sub");
}

static void on_fetch_up(struct al_aconn *c, void *arg)
{
	(void)c;
	maybe_fetch(arg);
}

static void on_sub_up(struct al_aconn *c, void *arg)
{
	al_aconn_subscribe(c, AL_KEY_CANCEL_CHANNEL, on_cancel_msg, arg);
}

/* ---- drain ---- */

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	/* Grace is over: stop what still runs and give it back. */
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = 0; i < w->conf->slots; i++) {
			struct slot *s = &w->backends[b].slots[i];

			if (s->busy && s->runner) {
				s->released = true;
				al_runner_stop(s->runner, AL_ST_SANDBOX_ERROR, "released by a draining worker");
			}
		}
	}
	if (idle(w))
		event_base_loopexit(w->base, NULL);
	else {
		/* Give Redis a moment to take the releases, then leave anyway:
		 * anything not acknowledged comes back through the lease. */
		struct timeval tv = { 3, 0 };

		event_base_loopexit(w->base, &tv);
	}
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct worker *w = arg;
	struct timeval tv = { (time_t)(w->conf->drain_grace_ms / 1000),
			      (suseconds_t)(w->conf->drain_grace_ms % 1000) * 1000 };

	(void)what;
	if (w->draining)
		return;
	w->draining = true;
	al_log("info", "drain", "signal=%d busy=%u held=%u grace_ms=%llu", (int)sig, busy_slots(w),
	       held_jobs(w), (unsigned long long)w->conf->drain_grace_ms);
	/* Held jobs have not started: back to the queue for other workers. */
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = w->conf->slots; i < nplaces(w); i++) {
			struct slot *s = &w->backends[b].slots[i];

			if (s->waiting)
				give_back(w, s);
		}
	}
	if (idle(w)) {
		event_base_loopexit(w->base, NULL);
		return;
	}
	evtimer_add(w->grace, &tv);
}


/* Warm pools: each served tier whose policy asks for one, on its backend. */
static void start_pools(struct worker *w)
{
	for (size_t i = 0; i < w->policy.ntiers; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		struct backend_state *be = backend_for(w, t->backend);
		struct al_pool_spec ps = {
			.tier = t->name,
			.size = t->pool,
			.memory_bytes = t->defaults.memory_bytes,
			.cpu_millis = t->cpu_millis,
			.image = t->image,
			.max_idle_ms = t->pool_max_idle_ms,
		};
		struct al_err err = { 0 };
		bool served = w->conf->ntiers == 0;

		for (unsigned k = 0; k < w->conf->ntiers; k++)
			served |= !strcmp(w->conf->tiers[k], t->name);
		if (!t->pool || !served || !be || !be->ok)
			continue;
		if (!be->ops->pool) {
			al_log("warn", "pool_unsupported", "tier=%s backend=%s", t->name, be->ops->name);
			continue;
		}
		if (be->ops->pool(&w->conf->backend, &ps, &err))
			al_log("error", "pool", "tier=%s backend=%s why=\"%s\"", t->name, be->ops->name,
			       err.msg);
		else
			al_log("info", "pool", "tier=%s backend=%s size=%u", t->name, be->ops->name, t->pool);
	}
}

/* ---- set-up ---- */

static int setup_backends(struct worker *w)
{
	const struct al_backend_ops *const *all = al_backend_all();

	for (size_t i = 0; i < w->policy.ntiers; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		bool served = w->conf->ntiers == 0;
		const struct al_backend_ops *ops = NULL;
		struct backend_state *be;
		struct al_err err = { 0 };

		for (unsigned k = 0; k < w->conf->ntiers; k++)
			served |= !strcmp(w->conf->tiers[k], t->name);
		if (!served)
			continue;
		for (int b = 0; b < AL_BANDS && w->nstreams < MAX_STREAMS; b++) {
			al_key_queue(w->stream_buf[w->nstreams], t->name, b);
			w->streams[w->nstreams] = w->stream_buf[w->nstreams];
			w->nstreams++;
		}
		if (backend_for(w, t->backend))
			continue;
		for (size_t k = 0; all[k]; k++)
			if (!strcmp(all[k]->name, t->backend))
				ops = all[k];
		if (!ops) {
			al_log("error", "backend_missing", "tier=%s backend=%s note=\"not built into this worker; its jobs fail with sandbox_error\"",
			      t->name, t->backend);
			ops = &al_backend_noop; /* placeholder slots; never run */
			be = &w->backends[w->nbackends++];
			be->ops = ops;
			be->ok = false;
			snprintf(be->why, sizeof(be->why), "backend %s is not built in", t->backend);
		} else {
			be = &w->backends[w->nbackends++];
			be->ops = ops;
			if (ops == &al_backend_noop && !w->conf->allow_noop) {
				be->ok = false;
				snprintf(be->why, sizeof(be->why), "the noop backend is for benchmarks; start the worker with --allow-noop");
			} else if (al_backend_init(ops, &w->conf->backend, &err)) {
				be->ok = false;
				snprintf(be->why, sizeof(be->why), "%s", err.msg);
			} else {
				be->ok = true;
				al_backend_sweep(ops, &w->conf->backend, NULL);
			}
		}
		al_log(be->ok ? "info" : "error", "backend", "name=%s ok=%s%s%s%s", be->ops->name,
		      be->ok ? "yes" : "no", be->ok ? "" : " why=\"", be->ok ? "" : be->why,
		      be->ok ? "" : "\"");
		be->slots = calloc(nplaces(w), sizeof(*be->slots));
		if (!be->slots)
			return -1;
		for (unsigned k = 0; k < nplaces(w); k++) {
			be->slots[k].w = w;
			be->slots[k].index = (int)k;
			be->slots[k].ops = be->ops;
			be->slots[k].be = be;
		}
		if (w->nbackends == (int)(sizeof(w->backends) / sizeof(w->backends[0])))
			break;
	}
	if (w->nstreams == 0) {
		al_log("error", "no_tiers", "note=\"none of the tiers asked for is in the policy\"");
		return -1;
	}
	start_pools(w);
	return 0;
}

int al_worker_run(const struct al_worker_conf *conf)
{
	struct worker w = { .conf = conf, .exit_code = 0 };
	struct al_err err = { 0 };

	w.commits_tail = &w.commits;
	if (al_redis_url_parse(conf->redis_url, &w.url, &err) ||
	    al_policy_load(conf->policy_path, &w.policy, &err)) {
		fprintf(stderr, "airlock-worker: %s\n", err.msg);
		return 2;
	}
	w.base = event_base_new();
	if (!w.base || setup_backends(&w)) {
		al_policy_free(&w.policy);
		return 2;
	}
	w.hb = evtimer_new(w.base, heartbeat, &w);
	w.flush_ev = event_new(w.base, -1, 0, on_flush, &w);
	w.grace = evtimer_new(w.base, on_grace, &w);
	w.sigterm = evsignal_new(w.base, SIGTERM, on_signal, &w);
	w.sigint = evsignal_new(w.base, SIGINT, on_signal, &w);
	evsignal_add(w.sigterm, NULL);
	evsignal_add(w.sigint, NULL);
	w.hooks = al_webhooks_new(w.base, conf->webhook_secret);
	w.cmd = al_aconn_new(w.base, &w.url, "cmd", on_cmd_up, on_conn_down, &w);
	w.fetch = al_aconn_new(w.base, &w.url, "fetch", on_fetch_up, on_conn_down, &w);
	w.sub = al_aconn_new(w.base, &w.url, "sub", on_sub_up, on_conn_down, &w);
	al_log("info", "worker_start", "worker=%s tiers=%d slots=%u prefetch=%u redis=%s",
	       conf->backend.worker_id, w.nstreams / AL_BANDS, conf->slots, conf->prefetch,
	       conf->redis_url);
	event_base_dispatch(w.base);

	/* Let callbacks in flight finish; each is bounded by its timeout. */
	for (int i = 0; i < AL_WEBHOOK_TIMEOUT_MS / 100 && al_webhooks_inflight(w.hooks) > 0; i++) {
		struct timeval tv = { 0, 100000 };

		event_base_loopexit(w.base, &tv);
		event_base_dispatch(w.base);
	}
	if (al_aconn_is_up(w.cmd)) {
		/* best effort: the last histogram counts, and say goodbye so
		 * `airlock stats` stops listing us */
		hist_flush(&w);
		struct timeval tv = { 0, 200000 };
		char alive[AL_KEY_MAX];
		const char *del[] = { "DEL", alive };
		const char *hdel[] = { "HDEL", AL_KEY_WORKERS, conf->backend.worker_id };

		al_key_worker(alive, conf->backend.worker_id);
		al_aconn_cmd(w.cmd, NULL, NULL, 2, del, NULL);
		al_aconn_cmd(w.cmd, NULL, NULL, 3, hdel, NULL);
		event_base_loopexit(w.base, &tv);
		event_base_dispatch(w.base);
	}
	/* Connections first: their pending callbacks run now (with no reply)
	 * while the slots and the commit queue still exist. */
	w.draining = true;
	al_aconn_free(w.cmd);
	al_aconn_free(w.fetch);
	al_aconn_free(w.sub);
	/* Leaving: whatever still runs is killed; its lease brings it back. */
	for (int b = 0; b < w.nbackends; b++) {
		for (unsigned i = 0; i < nplaces(&w); i++) {
			struct slot *s = &w.backends[b].slots[i];

			if (s->runner)
				al_runner_free(s->runner);
			if (s->have_job)
				al_job_free(&s->job);
		}
		free(w.backends[b].slots);
		if (w.backends[b].ok && w.backends[b].ops->fini)
			w.backends[b].ops->fini();
	}
	while (w.commits) {
		struct commit *c = w.commits;

		al_log("warn", "unsent", "job=%s what=commit note=\"Redis did not confirm; the lease will re-deliver\"",
		       c->id);
		w.commits = c->next;
		commit_free(c);
	}
	event_base_loop(w.base, EVLOOP_NONBLOCK); /* what is still queued (refills) */
	al_webhooks_free(w.hooks);
	event_free(w.flush_ev);
	event_free(w.hb);
	event_free(w.grace);
	event_free(w.sigterm);
	event_free(w.sigint);
	event_base_free(w.base);
	al_policy_free(&w.policy);
	al_log("info", "worker_exit", "worker=%s done=%llu", conf->backend.worker_id,
	      (unsigned long long)w.jobs_done);
	return w.exit_code;
}
