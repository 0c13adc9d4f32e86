/* jobs.c - running a job (see worker.h): the admission re-check, the
 * runner and its result, service-VM leases, prefetched jobs held and handed
 * to free slots, the latency histograms. */
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

static const unsigned hist_bounds[HIST_BOUNDS] = {5,	10,   25,   50,	   100,	  250,	500,
						  1000, 2500, 5000, 10000, 30000, 60000};

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
	uint64_t v[2] = {wait_ms, run_ms};

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

/* Each histogram's key is named in al:hists (SADD with every flush: the
 * registry survives a Redis that lost it), so that the scheduler's metrics
 * read them without KEYS. */
void wk_hist_flush(struct worker *w)
{
	static const char *const kind[2] = {"wait", "run"};

	for (int i = 0; i < w->nhists; i++) {
		struct hist *h = &w->hists[i];
		bool any = false;

		for (int k = 0; k < 2; k++)
			any = any || h->sum_ms[k];
		if (any) {
			struct al_call c;

			al_registry_add_call(&c, AL_KEY_HISTS, h->key);
			al_aconn_send(w->cmd, &c, NULL, NULL);
			al_call_free(&c);
		}

		for (int k = 0; k < 2; k++) {
			char field[32], val[24];

			for (int b = 0; b <= HIST_BOUNDS; b++) {
				if (!h->n[k][b])
					continue;
				if (b < HIST_BOUNDS)
					snprintf(field, sizeof(field), "%s_in_%u", kind[k],
						 hist_bounds[b]);
				else
					snprintf(field, sizeof(field), "%s_in_inf", kind[k]);
				snprintf(val, sizeof(val), "%llu", (unsigned long long)h->n[k][b]);
				{
					const char *argv[] = {"HINCRBY", h->key, field, val};

					if (al_aconn_cmd(w->cmd, NULL, NULL, 4, argv, NULL) == 0)
						h->n[k][b] = 0;
				}
			}
			if (h->sum_ms[k]) {
				const char *argv[] = {"HINCRBY", h->key, field, val};

				snprintf(field, sizeof(field), "%s_sum_ms", kind[k]);
				snprintf(val, sizeof(val), "%llu",
					 (unsigned long long)h->sum_ms[k]);
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
	char now[24];

	if (!name || !exp || !max || !ip)
		return;
	snprintf(now, sizeof(now), "%llu", (unsigned long long)al_now_ms());
	{
		const char *kv[] = {"job",	    s->id,
				    "tier",	    s->tier->name,
				    "worker",	    w->conf->backend.worker_id,
				    "ip",	    ip,
				    "ports",	    ports ? ports : "",
				    "created_ms",   now,
				    "expires_ms",   exp,
				    "max_until_ms", max,
				    "state",	    "running"};
		struct al_call c;

		al_vm_record_call(&c, name, kv, sizeof(kv) / sizeof(kv[0]) / 2);
		wk_send_call(w, &c, "vm_lease", s->id);
		al_vm_index_call(&c, name, exp);
		wk_send_call(w, &c, "vm_lease", s->id);
	}
	al_log("info", "vm_up", "job=%s vm=%s ip=%s ports=%s lease_expires_ms=%s", s->id, name, ip,
	       ports ? ports : "", exp);
}

/* One live-output entry of the job in slot s (PROTOCOL.md, "Live output"):
 * t out|err with its bytes, or t restart (this attempt's output so far is
 * void: the job runs again). The first entry sets the stream's TTL past the
 * job's end; the result's commit writes t end and the result's own TTL. */
static void out_entry(struct slot *s, const char *type, const void *data, size_t len)
{
	wk_send_output(s->w, s->id, s->attempt, type, data, len, &s->out_ttl_set,
		       s->job.limits.wall_ms + s->w->policy.result_ttl_ms + 600000);
}

static void on_job_output(struct wk_runner *r, int stream, const void *data, size_t len, void *arg)
{
	(void)r;
	out_entry(arg, stream == 1 ? "out" : "err", data, len);
}

static void on_job_done(struct wk_runner *r, struct al_result *res, void *arg)
{
	struct slot *s = arg;
	struct worker *w = s->w;

	res->queued_ms = s->job.submitted_ms;
	if (s->run_us && !s->released) { /* --prefetch auto sizes by these */
		uint64_t d = al_mono_us() - s->run_us + 1;
		uint64_t *avg = &s->be->run_us_avg;

		*avg = *avg ? (*avg * 7 + d) / 8 : d;
	}
	s->run_us = 0;
	al_log("info", "job_done",
	       "job=%s attempt=%u tier=%s backend=%s slot=%d status=%s exit=%d signal=%d "
	       "wall_ms=%llu cpu_ms=%llu queue_ms=%lld%s%s%s",
	       s->id, s->attempt, s->tier->name, s->ops->name, s->index,
	       al_status_name(res->status), res->has_exit_code ? res->exit_code : -1, res->signal,
	       (unsigned long long)res->wall_ms, (unsigned long long)res->cpu_ms,
	       (long long)(res->started_ms - (res->queued_ms ? res->queued_ms : res->started_ms)),
	       res->error ? " error=\"" : "", res->error ? res->error : "", res->error ? "\"" : "");
	hist_add(w, s->tier->name, s->ops->name,
		 res->queued_ms && res->started_ms > res->queued_ms
		     ? res->started_ms - res->queued_ms
		     : 0,
		 res->wall_ms);
	if (!s->released && wk_runner_cache_full(r)) { /* the host's, not the job's */
		wk_inputs_full(w, s, res->error);
		return;
	}
	if (!s->released)
		wk_health_note(w, s->be, res, wk_runner_setup_failed(r));
	if (s->released ||
	    (res->status == AL_ST_SANDBOX_ERROR && s->attempt < s->job.max_attempts)) {
		if (s->out_ttl_set) /* it streamed output: readers start over */
			out_entry(s, "restart", NULL, 0);
		/* drained: given back for another worker, same attempt */
		wk_retry_later(w, s, s->released ? 0 : backoff_ms(s->tier, s->attempt),
			       !s->released);
	} else {
		if ((s->ops->caps & AL_CAP_SERVICE) && res->status == AL_ST_OK)
			record_vm_lease(w, s, res);
		wk_commit_result(w, res, s->stream, s->entry, (long)s->attempt, &s->job);
	}
	w->jobs_done++;
	wk_slot_release(s);
}

/* Decode a claimed job into s and check it. AL_EINVAL (err says why) when
 * it cannot run: it is ended then, rejected with that reason, and s freed. */
int wk_job_accept(struct worker *w, struct slot *s, const char *raw, size_t rawlen,
		  struct al_err *err)
{
	int rc = al_job_decode(raw, rawlen, &s->job, err);

	if (rc)
		wk_dead_letter(w, s->stream, s->entry, err->msg, s->id, raw, rawlen);
	else
		s->have_job = true;
	/* Defence in depth: the worker re-checks the job against its own copy
	 * of the policy (deadline 0: the claim already checked it). */
	if (!rc)
		rc = al_policy_admit(&w->policy, &s->job, 0, err);
	if (rc) {
		wk_commit_status(w, s->id, s->stream, s->entry, (long)s->attempt, AL_ST_REJECTED,
				 err->msg);
		wk_slot_release(s);
	}
	return rc;
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
		wk_commit_status(w, s->id, s->stream, s->entry, (long)s->attempt, AL_ST_EXPIRED,
				 "not started before its deadline");
		wk_slot_release(s);
		return;
	}
	wk_job_run(w, s);
}

/* Start held jobs of backend be in its free slots: the highest band first,
 * then the oldest (a job fetched ahead never delays one of a higher band
 * held with it). A paused session waiting to resume here goes first: its
 * backend's last free slot is left to it. */
void wk_dispatch_held(struct worker *w, struct backend_state *be)
{
	bool restores = (be->ops->caps & AL_CAP_SNAPSHOT) || be->ops->snapshot_ok;

	while (!w->draining) {
		struct slot *s = NULL, *p = NULL;
		unsigned nfree = 0;

		for (unsigned i = 0; i < w->conf->slots; i++)
			if (!be->slots[i].busy && !nfree++)
				s = &be->slots[i];
		if (w->resumes_waiting && restores && nfree <= 1)
			return;
		for (unsigned i = w->conf->slots; s && i < wk_nplaces(w); i++) {
			struct slot *q = &be->slots[i];

			if (q->waiting &&
			    (!p || q->band < p->band || (q->band == p->band && q->seq < p->seq)))
				p = q;
		}
		if (!p)
			return;
		run_held(w, p, s);
	}
}

/* Slot s's job cannot run here (its backend or its tier's runtime cannot
 * start on this worker): its result is sandbox_error, why. */
static void unavailable(struct worker *w, struct slot *s, char *why)
{
	al_log("error", "backend_unavailable", "job=%s tier=%s %s", s->id, s->tier->name, why);
	wk_commit_result(w,
			 &(struct al_result){.version = AL_PROTO_VERSION,
					     .id = s->id,
					     .attempt = s->attempt,
					     .status = AL_ST_SANDBOX_ERROR,
					     .error = why},
			 s->stream, s->entry, (long)s->attempt, &s->job);
	wk_slot_release(s);
}

/* Run the accepted job of slot s on its tier's backend. */
void wk_job_run(struct worker *w, struct slot *s)
{
	struct backend_state *be = wk_backend_for(w, s->tier->backend);
	struct al_run_spec spec = {0};
	struct al_err rterr = {0};
	char why[AL_ERR_MSG_MAX + 64];

	if (!be || !be->ok) {
		snprintf(why, sizeof(why), "backend %s unavailable on worker %s: %s",
			 s->tier->backend, w->conf->backend.worker_id,
			 be ? be->why : "not built in");
		unavailable(w, s, why);
		return;
	}
	if (be->ops->runtime_ok && s->tier->oci_runtime &&
	    be->ops->runtime_ok(s->tier->oci_runtime, s->tier->oci_platform, &rterr)) {
		snprintf(why, sizeof(why), "tier %s unavailable on worker %s: %s", s->tier->name,
			 w->conf->backend.worker_id, rterr.msg);
		unavailable(w, s, why);
		return;
	}
	if (s->job.session) { /* the slot stays the session's */
		wk_session_start(w, s, NULL);
		return;
	}
	if (!wk_inputs_room(w, s))
		return;
	spec.job = &s->job;
	wk_run_spec_of(s->tier, &s->job, (unsigned)s->index, &spec);
	spec.attempt = s->attempt;
	wk_run_spec_egress(s->tier, &s->job, s->egress, &s->negress, &spec);
	s->run_us = al_mono_us();
	s->runner = wk_runner_start(w->base, s->ops, &w->conf->backend, &spec, on_job_done, s);
	if (!s->runner) {
		al_log("error", "out_of_memory", "job=%s", s->id);
		wk_slot_release(s);
		return;
	}
	s->out_ttl_set = false;
	if (!w->conf->no_live_output && !(s->ops->caps & AL_CAP_SERVICE))
		wk_runner_on_output(s->runner, on_job_output);
	al_log("info", "job_start", "job=%s attempt=%u tier=%s backend=%s slot=%d", s->id,
	       s->attempt, s->tier->name, s->ops->name, s->index);
}
