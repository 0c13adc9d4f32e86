/* service.c - the worker service (see service.h): start-up and wiring of
 * the parts worker.h lists.
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
#include <sys/resource.h>
#include <unistd.h>

#include "../common/aconn.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "egress_ca.h"
#include "proxy.h"
#include "grading.h"
#include "worker.h"

/* ---- the loop pass (worker.h: wk_pass_want) ---- */

static void on_pass(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	unsigned want = w->pass_wants;

	(void)fd;
	(void)what;
	w->pass_wants = 0; /* a want from here on arms the next pass */
	if (want & WK_PASS_DISPATCH)
		for (int b = 0; b < w->nbackends; b++)
			if (w->backends[b].dispatch_wanted) {
				w->backends[b].dispatch_wanted = false;
				wk_dispatch_held(w, &w->backends[b]);
			}
	/* a single slot's results held back wait for the answer to the COMMIT
	 * in flight, while no fetch is due; so does the fetch, which rides on
	 * them then */
	bool held = (want & WK_PASS_FLUSH) && wk_commits_may_wait(w) && !wk_fetch_due(w);

	if ((want & WK_PASS_FLUSH) && !held)
		wk_flush_commits(w);
	if ((want & WK_PASS_EXIT) && w->draining && wk_idle(w))
		event_base_loopexit(w->base, NULL);
	if ((want & WK_PASS_FETCH) && !held)
		wk_maybe_fetch(w);
}

/* ---- set-up ---- */

/* One backend state per backend the served tiers name, with its slots; a
 * backend that cannot start leaves its tiers' jobs to fail with its reason.
 * Fails (err) only when nothing could be served. */
static int setup_backends(struct worker *w, struct al_err *err)
{
	const struct al_backend_ops *const *all = al_backend_all();

	/* the build trees of grading jobs a crashed run of this worker id left */
	wk_grading_sweep(&w->conf->backend);

	for (size_t i = 0; i < w->policy.ntiers; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		const struct al_backend_ops *ops = NULL;
		struct backend_state *be;
		struct al_err berr = {0};

		if (!wk_serves(w, t->name))
			continue;
		for (int b = 0; b < AL_BANDS && w->nstreams < MAX_STREAMS; b++) {
			al_key_queue(w->stream_buf[w->nstreams], t->name, b);
			w->streams[w->nstreams] = w->stream_buf[w->nstreams];
			w->nstreams++;
		}
		if (wk_backend_for(w, t->backend))
			continue;
		for (size_t k = 0; all[k]; k++)
			if (!strcmp(all[k]->name, t->backend))
				ops = all[k];
		if (!ops) {
			al_log("error", "backend_missing",
			       "tier=%s backend=%s note=\"not built into this worker; its jobs "
			       "fail with sandbox_error\"",
			       t->name, t->backend);
			ops = &al_backend_noop; /* placeholder slots; never run */
			be = &w->backends[w->nbackends++];
			be->ops = ops;
			be->ok = false;
			snprintf(be->why, sizeof(be->why), "backend %s is not built in",
				 t->backend);
		} else {
			be = &w->backends[w->nbackends++];
			be->ops = ops;
			if (ops == &al_backend_noop && !w->conf->allow_noop) {
				be->ok = false;
				snprintf(be->why, sizeof(be->why),
					 "the noop backend is for benchmarks; start the worker "
					 "with --allow-noop");
			} else if (al_backend_init(ops, &w->conf->backend, &berr)) {
				be->ok = false;
				snprintf(be->why, sizeof(be->why), "%s", berr.msg);
			} else {
				be->ok = true;
				al_backend_sweep(ops, &w->conf->backend, NULL);
			}
		}
		al_log(be->ok ? "info" : "error", "backend", "name=%s ok=%s%s%s%s", be->ops->name,
		       be->ok ? "yes" : "no", be->ok ? "" : " why=\"", be->ok ? "" : be->why,
		       be->ok ? "" : "\"");
		be->w = w;
		be->slots = calloc(wk_nplaces(w), sizeof(*be->slots));
		if (!be->slots)
			return al_err_set(err, AL_ENOMEM, "out of memory for %s's slots",
					  be->ops->name);
		for (unsigned k = 0; k < wk_nplaces(w); k++) {
			be->slots[k].w = w;
			be->slots[k].index = (int)k;
			be->slots[k].ops = be->ops;
			be->slots[k].be = be;
		}
		if (w->nbackends == (int)(sizeof(w->backends) / sizeof(w->backends[0])))
			break;
	}
	if (w->nstreams == 0)
		return al_err_set(err, AL_EINVAL, "none of the tiers asked for is in the policy");
	/* a tier's own OCI runtime (runsc): said at start whether it runs here */
	for (size_t i = 0; i < w->policy.ntiers; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		struct backend_state *be = wk_backend_for(w, t->backend);
		struct al_err terr = {0};

		if (!wk_serves(w, t->name) || !be || !be->ok || !be->ops->runtime_ok ||
		    !t->oci_runtime)
			continue;
		if (be->ops->runtime_ok(t->oci_runtime, t->oci_platform, &terr))
			al_log("error", "tier_unavailable",
			       "tier=%s runtime=%s why=\"%s\" note=\"its jobs fail with "
			       "sandbox_error\"",
			       t->name, t->oci_runtime, terr.msg);
	}
	for (int i = 0; i < w->nstreams; i++) { /* which backend each stream feeds */
		char tier[AL_ID_MAX + 1];
		const struct al_tier_policy *t =
		    al_key_queue_tier(w->streams[i], tier, sizeof(tier))
			? al_policy_tier(&w->policy, tier)
			: NULL;

		w->stream_be[i] = t ? wk_backend_for(w, t->backend) : NULL;
	}
	wk_start_pools(w);
	return 0;
}

/* What of the descriptor limit the egress tunnels of all jobs may hold:
 * the rest is kept for sandboxes' set-up (per slot), Redis, the pools and
 * the worker itself, so one job's connections never make another's
 * sandbox fail to start. */
static void fd_budget(struct worker *w)
{
	struct rlimit rl = {0};
	unsigned long reserve = 256 + 64ul * w->conf->slots * (unsigned long)w->nbackends;
	unsigned long budget = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) { /* as much as it may have */
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		budget = rl.rlim_cur > reserve + 8 * AL_EGRESS_FDS_PER_TUNNEL
			     ? (unsigned long)rl.rlim_cur - reserve
			     : 8 * AL_EGRESS_FDS_PER_TUNNEL;
	}
	wk_proxy_set_fd_budget((unsigned)budget);
	al_log("info", "egress_fd_budget", "nofile=%llu reserved=%lu tunnels_max=%lu",
	       (unsigned long long)rl.rlim_cur, reserve, budget / AL_EGRESS_FDS_PER_TUNNEL);
}

/* The loop's events and the three connections; fails (err) when one
 * cannot be made: the worker does not start without all of them. */
static int wire(struct worker *w, struct al_err *err)
{
	const struct wk_worker_conf *conf = w->conf;

	w->hb = evtimer_new(w->base, wk_heartbeat, w);
	w->pass_ev = event_new(w->base, -1, 0, on_pass, w);
	w->grace = evtimer_new(w->base, wk_on_grace, w);
	w->sigterm = evsignal_new(w->base, SIGTERM, wk_on_signal, w);
	w->sigint = evsignal_new(w->base, SIGINT, wk_on_signal, w);
	w->sighup = evsignal_new(w->base, SIGHUP, wk_on_hup, w);
	w->hooks = wk_webhooks_new(w->base, conf->webhook_secret, conf->webhook_secrets_dir);
	if (!w->hb || !w->pass_ev || !w->grace || !w->sigterm || !w->sigint || !w->sighup ||
	    !w->hooks || evsignal_add(w->sigterm, NULL) || evsignal_add(w->sigint, NULL) ||
	    evsignal_add(w->sighup, NULL))
		return al_err_set(err, AL_ENOMEM, "out of memory making the loop's events");
	w->cmd = al_aconn_new(w->base, &w->url, "cmd", wk_on_cmd_up, wk_on_conn_down, w);
	w->fetch = al_aconn_new(w->base, &w->url, "fetch", wk_on_fetch_up, wk_on_conn_down, w);
	w->sub = al_aconn_new(w->base, &w->url, "sub", wk_on_sub_up, wk_on_conn_down, w);
	w->sessq = al_aconn_new(w->base, &w->url, "sessq", wk_sessions_on_up, wk_on_conn_down, w);
	if (!w->cmd || !w->fetch || !w->sub || !w->sessq)
		return al_err_set(err, AL_ENOMEM, "out of memory making the connections");
	return AL_OK;
}

/* After the loop: callbacks in flight get their time (each bounded by its
 * timeout), the last histogram counts go out, and the worker leaves the
 * registry so that `airlock stats` stops listing it (best effort). */
static void say_goodbye(struct worker *w)
{
	for (int i = 0; i < AL_WEBHOOK_TIMEOUT_MS / 100 && wk_webhooks_inflight(w->hooks) > 0;
	     i++) {
		struct timeval tv = {0, 100000};

		event_base_loopexit(w->base, &tv);
		event_base_dispatch(w->base);
	}
	if (w->cmd && al_aconn_is_up(w->cmd)) {
		struct timeval tv = {0, 200000};
		struct al_call c;

		wk_hist_flush(w);
		al_worker_alive_end_call(&c, w->conf->backend.worker_id);
		al_aconn_send(w->cmd, &c, NULL, NULL);
		al_call_free(&c);
		al_worker_unregister_call(&c, w->conf->backend.worker_id);
		al_aconn_send(w->cmd, &c, NULL, NULL);
		al_call_free(&c);
		event_base_loopexit(w->base, &tv);
		event_base_dispatch(w->base);
	}
}

/* Everything goes: connections first (their pending callbacks run now,
 * with no reply, while the slots and the commit queue still exist), then
 * whatever still runs (killed: its lease brings it back), the commits
 * Redis never confirmed, the events. */
static void tear_down(struct worker *w)
{
	w->draining = true;
	wk_sessions_end_all(w, AL_SESS_WORKER_STOP);
	al_aconn_free(w->sessq);
	al_aconn_free(w->cmd);
	al_aconn_free(w->fetch);
	al_aconn_free(w->sub);
	wk_health_free(w);
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = 0; w->backends[b].slots && i < wk_nplaces(w); i++) {
			struct slot *s = &w->backends[b].slots[i];

			if (s->runner)
				wk_runner_free(s->runner);
			if (s->have_job)
				al_job_free(&s->job);
		}
		free(w->backends[b].slots);
		if (w->backends[b].ok && w->backends[b].ops->fini)
			w->backends[b].ops->fini();
	}
	while (w->commits) {
		struct commit *c = w->commits;

		al_log(
		    "warn", "unsent",
		    "job=%s what=commit note=\"Redis did not confirm; the lease will re-deliver\"",
		    c->id);
		w->commits = c->next;
		wk_commit_free(c);
	}
	event_base_loop(w->base, EVLOOP_NONBLOCK); /* what is still queued (refills) */
	wk_webhooks_free(w->hooks);
	if (w->pass_ev)
		event_free(w->pass_ev);
	if (w->hb)
		event_free(w->hb);
	if (w->grace)
		event_free(w->grace);
	if (w->sigterm)
		event_free(w->sigterm);
	if (w->sigint)
		event_free(w->sigint);
	if (w->sighup)
		event_free(w->sighup);
	event_base_free(w->base);
	al_policy_free(&w->policy);
	while (w->retired) {
		struct wk_retired *r = w->retired;

		w->retired = r->next;
		al_policy_free(&r->policy);
		free(r);
	}
}

int wk_worker_run(const struct wk_worker_conf *conf, struct al_err *err)
{
	struct worker w = {.conf = conf, .exit_code = 0, .commit_rider = &wk_fetch_rider};

	w.commits_tail = &w.commits;
	if (al_redis_url_parse(conf->redis_url, &w.url, err) ||
	    al_policy_load(conf->policy_path, &w.policy, err))
		return 2;
	if (wk_egress_ca_for(&w.policy, conf->backend.state_dir, err)) {
		al_policy_free(&w.policy);
		return 2;
	}
	if (!(w.base = event_base_new())) {
		al_policy_free(&w.policy);
		al_err_set(err, AL_ENOMEM, "out of memory making the event loop");
		return 2;
	}
	if (setup_backends(&w, err) || (fd_budget(&w), wire(&w, err))) {
		tear_down(&w);
		return 2;
	}
	al_log("info", "worker_start", "worker=%s tiers=%d slots=%u prefetch=%s%u redis=%s",
	       conf->backend.worker_id, w.nstreams / AL_BANDS, conf->slots,
	       conf->prefetch_auto ? "auto:" : "", conf->prefetch, conf->redis_url);
	event_base_dispatch(w.base);
	say_goodbye(&w);
	tear_down(&w);
	al_log("info", "worker_exit", "worker=%s done=%llu", conf->backend.worker_id,
	       (unsigned long long)w.jobs_done);
	return w.exit_code;
}
