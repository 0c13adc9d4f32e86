/* health.c - a backend that keeps failing to set up sandboxes stops taking
 * jobs (so it burns no more of other jobs' attempts), says why, and takes
 * jobs again once a probe job runs on it (worker.h).
 *
 * AL_SETUP_FAILS_MAX sandbox_errors in a row whose sandbox could not be
 * made or started (wk_runner_setup_failed: the host's, never what a job
 * did once it ran) pause the backend:
 * its tiers' streams leave the fetch, a job that arrives for it anyway
 * goes back to the queue unspent, and its registry entry, `airlock stats`
 * and the log say why. Every AL_PROBE_EVERY_MS a probe (`sh -c true` with
 * its first tier's defaults, on a free slot) runs through the same runner;
 * the first that ends ok resumes it.
 *
 * A fetch that failed for want of room in the host's input cache is
 * neither: the job goes back for later with its attempt unspent, and every
 * job with inputs that comes meanwhile does the same until the cache has
 * room again (looked at as each comes, and at each heartbeat); jobs
 * without inputs run on. The
 * registry entry says "inputs" among the paused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker.h"
#include "instage.h"
#include "../common/clock.h"

static void probe_done(struct wk_runner *r, struct al_result *res, void *arg)
{
	struct backend_state *be = arg;

	(void)r;
	be->probe_at_ms = al_mono_ms() + AL_PROBE_EVERY_MS;
	if (res->status == AL_ST_OK && res->has_exit_code && res->exit_code == 0) {
		al_log("info", "backend_resumed",
		       "backend=%s note=\"a probe job ran: taking jobs again\"", be->ops->name);
		be->paused = false;
		be->setup_failures = 0;
	} else {
		snprintf(be->pause_why, sizeof(be->pause_why), "%s",
			 res->error ? res->error : al_status_name(res->status));
		al_log("warn", "probe_failed", "backend=%s status=%s error=\"%s\"", be->ops->name,
		       al_status_name(res->status), be->pause_why);
	}
	/* freed on the next tick: this runs inside the runner */
	be->probe_over = true;
}

/* A probe on a free slot, with the defaults of the backend's first tier. */
static void probe_start(struct worker *w, struct backend_state *be)
{
	struct al_run_spec spec = {0};
	const struct al_tier_policy *t = NULL;
	struct al_err err = {0};
	unsigned slot = w->conf->slots;

	for (size_t i = 0; i < w->policy.ntiers && !t; i++)
		if (!strcmp(w->policy.tiers[i].backend, be->ops->name))
			t = &w->policy.tiers[i];
	for (unsigned i = 0; i < w->conf->slots && slot == w->conf->slots; i++)
		if (!be->slots[i].busy)
			slot = i;
	if (!t || slot == w->conf->slots)
		return; /* every slot busy: next tick */
	al_job_free(&be->probe_job);
	memset(&be->probe_job, 0, sizeof(be->probe_job));
	be->probe_job.version = AL_PROTO_VERSION;
	be->probe_job.id = strdup("probe");
	be->probe_job.tenant = strdup("default");
	be->probe_job.tier = strdup(t->name);
	be->probe_job.runtime = AL_RUNTIME_SH;
	be->probe_job.code.data = strdup("true");
	be->probe_job.code.len = 4;
	if (!be->probe_job.id || !be->probe_job.tenant || !be->probe_job.tier ||
	    !be->probe_job.code.data || al_policy_admit(&w->policy, &be->probe_job, 0, &err))
		return;
	spec.job = &be->probe_job;
	wk_run_spec_of(t, &be->probe_job, slot, &spec);
	be->probe_slot = slot;
	be->slots[slot].busy = true; /* no held job takes it meanwhile */
	be->probe = wk_runner_start(w->base, be->ops, &w->conf->backend, &spec, probe_done, be);
	if (!be->probe) {
		be->slots[slot].busy = false;
		return;
	}
	al_log("info", "probe_start", "backend=%s slot=%u", be->ops->name, slot);
}

void wk_health_note(struct worker *w, struct backend_state *be, const struct al_result *res,
		    bool setup_failed)
{
	/* only the host's failures count: a job can make its own sandbox fail
	 * after it started (a rogue guest), and must not pause it for others */
	if (!setup_failed) {
		be->setup_failures = 0;
		return;
	}
	if (++be->setup_failures < AL_SETUP_FAILS_MAX || be->paused)
		return;
	be->paused = true;
	be->probe_at_ms = al_mono_ms() + AL_PROBE_EVERY_MS;
	snprintf(be->pause_why, sizeof(be->pause_why), "%s",
		 res->error ? res->error : "sandbox_error");
	al_log("error", "backend_paused",
	       "backend=%s failures=%u error=\"%s\" note=\"no more jobs for it until a probe "
	       "job runs (every %d ms)\"",
	       be->ops->name, be->setup_failures, be->pause_why, AL_PROBE_EVERY_MS);
	/* the jobs it holds go back, unspent, for other workers */
	for (unsigned i = w->conf->slots; i < wk_nplaces(w); i++)
		if (be->slots[i].waiting)
			wk_give_back(w, &be->slots[i]);
}

void wk_health_tick(struct worker *w)
{
	struct al_err err = {0};

	/* the input cache: room again, whether a job with inputs came or not */
	if (w->inputs_full && !wk_instage_cache_room(&w->conf->backend, &err)) {
		al_log("info", "inputs_resumed", "note=\"the input cache has room again\"");
		w->inputs_full = false;
	}
	for (int b = 0; b < w->nbackends; b++) {
		struct backend_state *be = &w->backends[b];

		if (be->probe_over) {
			wk_runner_free(be->probe);
			be->probe = NULL;
			be->probe_over = false;
			be->slots[be->probe_slot].busy = false;
			if (!be->paused) { /* its slot is free again */
				be->dispatch_wanted = true;
				wk_pass_want(w, WK_PASS_DISPATCH | WK_PASS_FETCH);
			}
		}
		if (be->paused && !be->probe && !w->draining && al_mono_ms() >= be->probe_at_ms)
			probe_start(w, be);
	}
}

void wk_inputs_full(struct worker *w, struct slot *s, const char *why)
{
	if (!w->inputs_full)
		al_log("error", "inputs_paused",
		       "job=%s error=\"%s\" note=\"jobs with inputs wait, unspent, until the "
		       "input cache has room (looked at every %d ms)\"",
		       s->id, why ? why : "", AL_PROBE_EVERY_MS);
	w->inputs_full = true;
	snprintf(w->inputs_why, sizeof(w->inputs_why), "%s", why ? why : "the input cache is full");
	wk_retry_later(w, s, AL_PROBE_EVERY_MS, false);
	wk_slot_release(s);
}

bool wk_inputs_room(struct worker *w, struct slot *s)
{
	struct al_err err = {0};

	if (!s->job.ninputs || !w->inputs_full)
		return true;
	if (!wk_instage_cache_room(&w->conf->backend, &err)) {
		al_log("info", "inputs_resumed", "job=%s note=\"the input cache has room again\"",
		       s->id);
		w->inputs_full = false;
		return true;
	}
	snprintf(w->inputs_why, sizeof(w->inputs_why), "%s", err.msg);
	wk_retry_later(w, s, AL_PROBE_EVERY_MS, false);
	wk_slot_release(s);
	return false;
}

/* "name":"why" at out + n (a comma before it unless first); the new n. */
static int pause_entry(char *out, int n, size_t cap, bool any, const char *name, const char *why)
{
	if (n >= (int)cap - 16)
		return n;
	n += snprintf(out + n, cap - (size_t)n, "%s\"%s\":\"", any ? "," : "", name);
	/* the reason, as JSON: what could end the string goes */
	for (const char *p = why; *p && n < (int)cap - 8; p++)
		out[n++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? ' ' : *p;
	return n + snprintf(out + n, cap - (size_t)n, "\"");
}

int wk_health_json(const struct worker *w, char *out, size_t cap)
{
	int n = 0;
	bool any = false;

	for (int b = 0; b < w->nbackends && n < (int)cap - 8; b++) {
		const struct backend_state *be = &w->backends[b];

		if (!be->paused)
			continue;
		n = pause_entry(out, n, cap, any, be->ops->name, be->pause_why);
		any = true;
	}
	if (w->inputs_full) /* jobs with inputs wait */
		n = pause_entry(out, n, cap, any, "inputs", w->inputs_why);
	return n < (int)cap ? n : (int)cap - 1;
}

void wk_health_free(struct worker *w)
{
	for (int b = 0; b < w->nbackends; b++) {
		wk_runner_free(w->backends[b].probe);
		w->backends[b].probe = NULL;
		al_job_free(&w->backends[b].probe_job);
	}
}
