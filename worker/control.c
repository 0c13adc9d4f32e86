/* control.c - cancel, heartbeats (leases, the worker's registry entry,
 * metrics), connection events, drain on SIGTERM, warm pools (see
 * worker.h). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "egress_ca.h"
#include "../common/aconn.h"
#include "../common/log.h"
#include "../proto/contract.h"
#include "worker.h"
#include "../common/clock.h"

/* ---- cancel, heartbeat, connections ---- */

/* Cancel the job of s: stop it if it runs; end it if it is held. */
static void cancel_slot(struct worker *w, struct slot *s)
{
	if (s->session) {
		al_log("info", "cancel", "job=%s session=yes", s->id);
		wk_session_cancel(s);
	} else if (s->runner) {
		al_log("info", "cancel", "job=%s slot=%d", s->id, s->index);
		wk_runner_stop(s->runner, AL_ST_CANCELLED, "cancelled by a client while running");
	} else if (s->waiting) {
		al_log("info", "cancel", "job=%s held=yes", s->id);
		wk_commit_status(w, s->id, s->stream, s->entry, (long)s->attempt, AL_ST_CANCELLED,
				 "cancelled by a client before it started");
		wk_slot_release(s);
	}
}

static void cancel_job(struct worker *w, const char *id)
{
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = 0; i < wk_nplaces(w); i++) {
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

/* The worker's registry entry (al:workers) and its sign of life. */
static void register_self(struct worker *w)
{
	char desc[2048];
	struct al_call c;
	int n = 0;

	n += snprintf(desc + n, sizeof(desc) - (size_t)n,
		      "{\"pid\":%d,\"beat\":%llu,\"slots\":%u,\"busy\":%u,\"held\":%u,"
		      "\"draining\":%s,\"done\":%llu,\"policy\":\"%s\",\"backends\":[",
		      (int)getpid(), (unsigned long long)++w->beats,
		      (unsigned)w->nbackends * w->conf->slots, wk_busy_slots(w), wk_held_jobs(w),
		      w->draining ? "true" : "false", (unsigned long long)w->jobs_done,
		      w->policy.hash);
	for (int b = 0; b < w->nbackends && n < (int)sizeof(desc) - 64; b++)
		n += snprintf(desc + n, sizeof(desc) - (size_t)n, "%s\"%s%s\"", b ? "," : "",
			      w->backends[b].ops->name, w->backends[b].ok ? "" : "(unavailable)");
	n += snprintf(desc + n, sizeof(desc) - (size_t)n, "],\"accel\":{");
	for (int b = 0, k = 0; b < w->nbackends && n < (int)sizeof(desc) - 64; b++)
		if (w->backends[b].ok && w->backends[b].ops->accel)
			n += snprintf(desc + n, sizeof(desc) - (size_t)n, "%s\"%s\":\"%s\"",
				      k++ ? "," : "", w->backends[b].ops->name,
				      w->backends[b].ops->accel());
	n += snprintf(desc + n, sizeof(desc) - (size_t)n, "},\"paused\":{");
	if (n < (int)sizeof(desc) - 4)
		n += wk_health_json(w, desc + n, sizeof(desc) - (size_t)n - 4);
	snprintf(desc + n, sizeof(desc) - (size_t)n, "}}");
	al_worker_alive_call(&c, w->conf->backend.worker_id, w->conf->heartbeat_ms * 3);
	al_aconn_send(w->cmd, &c, NULL, NULL);
	al_call_free(&c);
	al_worker_register_call(&c, w->conf->backend.worker_id, desc);
	al_aconn_send(w->cmd, &c, NULL, NULL);
	al_call_free(&c);
}

void wk_heartbeat(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct timeval tv = {(time_t)(w->conf->heartbeat_ms / 1000),
			     (suseconds_t)(w->conf->heartbeat_ms % 1000) * 1000};

	(void)fd;
	(void)what;
	evtimer_add(w->hb, &tv);
	for (int b = 0; b < w->nbackends; b++)
		if (w->backends[b].ok && w->backends[b].ops->tick)
			w->backends[b].ops->tick(&w->conf->backend);
	wk_health_tick(w);
	if (!al_aconn_is_up(w->cmd))
		return;
	wk_sessions_renew(w);
	register_self(w);
	wk_hist_flush(w);
	/* Renew the lease on each running or held job; poll its cancel flag
	 * in case a pub/sub message was missed. A job held too long (the
	 * slots' jobs outlast it) goes back to the queue for other workers. */
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = 0; i < wk_nplaces(w); i++) {
			struct slot *s = &w->backends[b].slots[i];
			char jobkey[AL_KEY_MAX];
			struct flag_req *q;

			/* a session's job until its result (the open) is in: a
			 * microVM's boot may take longer than a lease */
			if (!s->busy || (!s->runner && !s->waiting && !wk_session_opening(s)))
				continue;
			if (s->waiting && al_now_ms() - s->held_ms >= AL_HOLD_MAX_MS) {
				al_log(
				    "info", "give_back",
				    "job=%s held_ms=%llu note=\"no slot freed; back to the queue\"",
				    s->id, (unsigned long long)(al_now_ms() - s->held_ms));
				s->be->hold_off = true;
				wk_give_back(w, s);
				continue;
			}
			{
				const char *claim[] = {"XCLAIM",
						       s->stream,
						       AL_GROUP_WORKERS,
						       w->conf->backend.worker_id,
						       "0",
						       s->entry,
						       "JUSTID"};
				const char *flag[] = {"HGET", jobkey, "cancel"};

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

void wk_on_cmd_up(struct al_aconn *c, void *arg)
{
	struct worker *w = arg;

	(void)c;
	al_log("info", "redis_up", "conn=cmd worker=%s", w->conf->backend.worker_id);
	for (int i = 0; i < w->nstreams; i++) {
		struct al_call grp;

		al_xgroup_create_call(&grp, w->streams[i], AL_GROUP_WORKERS);
		al_aconn_send(w->cmd, &grp, NULL, NULL);
		al_call_free(&grp);
	}
	wk_heartbeat(-1, 0, w);
	wk_flush_commits(w);
	wk_maybe_fetch(w);
}

void wk_on_conn_down(struct al_aconn *c, void *arg)
{
	struct worker *w = arg;

	if (c == w->fetch)
		w->block_fetching = false;
	al_log("warn", "redis_down",
	       "conn=%s note=\"reconnecting; results are kept until committed\"",
	       c == w->cmd     ? "cmd"
	       : c == w->fetch ? "fetch"
	       : c == w->sub   ? "sub"
			       : "sessq");
}

void wk_on_fetch_up(struct al_aconn *c, void *arg)
{
	(void)c;
	wk_maybe_fetch(arg);
}

void wk_on_sub_up(struct al_aconn *c, void *arg)
{
	al_aconn_subscribe(c, AL_KEY_CANCEL_CHANNEL, on_cancel_msg, arg);
}

/* ---- drain ---- */

void wk_on_grace(evutil_socket_t fd, short what, void *arg)
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
				wk_runner_stop(s->runner, AL_ST_SANDBOX_ERROR,
					       "released by a draining worker");
			}
		}
	}
	if (wk_idle(w))
		event_base_loopexit(w->base, NULL);
	else {
		/* Give Redis a moment to take the releases, then leave anyway:
		 * anything not acknowledged comes back through the lease. */
		struct timeval tv = {3, 0};

		event_base_loopexit(w->base, &tv);
	}
}

/* What of tier t its warm pools were made from: a reload must not change
 * it under them. */
static void pool_shape(const struct al_tier_policy *t, char *out, size_t n)
{
	int k = snprintf(out, n, "%u", (unsigned)t->pool);

	for (size_t i = 0; i < t->nimages && k > 0 && (size_t)k < n; i++)
		if (t->pools[i])
			k += snprintf(out + k, n - (size_t)k, ",%s=%u", t->images[i],
				      (unsigned)t->pools[i]);
	if (!strcmp(out, "0"))
		return; /* no pool: nothing else matters */
	if (k > 0 && (size_t)k < n)
		snprintf(out + k, n - (size_t)k, " %s %s %llu %llu %llu", t->image ? t->image : "-",
			 t->guest ? t->guest : "-", (unsigned long long)t->defaults.memory_bytes,
			 (unsigned long long)t->cpu_millis,
			 (unsigned long long)t->pool_max_idle_ms);
}

/* Why fresh cannot take the place of the worker's policy while it runs
 * (its streams, backends and pools were made from the served tiers):
 * writes the reason and returns false, else true. */
static bool reload_allowed(const struct worker *w, const struct al_policy *fresh, char *why,
			   size_t n)
{
	const struct al_policy *old = &w->policy;

	for (size_t i = 0; i < fresh->ntiers; i++) {
		const struct al_tier_policy *t = &fresh->tiers[i], *o;

		if (!wk_serves(w, t->name))
			continue;
		if (!(o = al_policy_tier(old, t->name))) {
			snprintf(why, n, "tier %s is new: this worker reads no queue for it",
				 t->name);
			return false;
		}
		if (strcmp(o->backend, t->backend)) {
			snprintf(why, n, "tier %s changed its backend from %s to %s", t->name,
				 o->backend, t->backend);
			return false;
		}
		char a[512], b[512];

		pool_shape(o, a, sizeof(a));
		pool_shape(t, b, sizeof(b));
		if (strcmp(a, b)) {
			snprintf(why, n,
				 "tier %s changed its warm pools (their size, image, guest, "
				 "memory, CPU or idle time)",
				 t->name);
			return false;
		}
	}
	for (size_t i = 0; i < old->ntiers; i++)
		if (wk_serves(w, old->tiers[i].name) &&
		    !al_policy_tier(fresh, old->tiers[i].name)) {
			snprintf(why, n, "tier %s, served by this worker, is gone from the policy",
				 old->tiers[i].name);
			return false;
		}
	return true;
}

void wk_on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct worker *w = arg;
	struct wk_retired *r;
	struct al_err err = {0};
	char why[AL_ERR_MSG_MAX];

	(void)sig;
	(void)what;
	if (!(r = calloc(1, sizeof(*r)))) {
		al_log("error", "policy_reload", "worker=%s result=refused error=\"out of memory\"",
		       w->conf->backend.worker_id);
		return;
	}
	if (al_policy_load(w->conf->policy_path, &r->policy, &err) ||
	    !reload_allowed(w, &r->policy, why, sizeof(why)) ||
	    wk_egress_ca_for(&r->policy, w->conf->backend.state_dir, &err)) {
		al_log(
		    "error", "policy_reload",
		    "worker=%s result=refused policy=%s error=\"%s\" note=\"the old policy stays "
		    "in force; %s\"",
		    w->conf->backend.worker_id, w->policy.hash, err.code ? err.msg : why,
		    err.code ? "fix the file and send SIGHUP again"
			     : "restart the worker to apply this change (SIGTERM drains it first)");
		al_policy_free(&r->policy);
		free(r);
		return;
	}
	/* the new one in force; the old kept for what runs under it */
	struct al_policy fresh = r->policy;

	r->policy = w->policy;
	w->policy = fresh;
	r->next = w->retired;
	w->retired = r;
	al_log("info", "policy_reload", "worker=%s result=ok policy=%s source=%s tiers=%zu",
	       w->conf->backend.worker_id, w->policy.hash, w->policy.source, w->policy.ntiers);
	if (al_aconn_is_up(w->cmd))
		register_self(w); /* the registry shows the new policy now */
}

void wk_on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct worker *w = arg;
	struct timeval tv = {(time_t)(w->conf->drain_grace_ms / 1000),
			     (suseconds_t)(w->conf->drain_grace_ms % 1000) * 1000};

	(void)what;
	if (w->draining)
		return;
	w->draining = true;
	al_log("info", "drain", "signal=%d busy=%u held=%u grace_ms=%llu", (int)sig,
	       wk_busy_slots(w), wk_held_jobs(w), (unsigned long long)w->conf->drain_grace_ms);
	/* a session ends now, unless it can be paused (docs/snapshots.md) */
	wk_sessions_drain(w);
	/* Held jobs have not started: back to the queue for other workers. */
	for (int b = 0; b < w->nbackends; b++) {
		for (unsigned i = w->conf->slots; i < wk_nplaces(w); i++) {
			struct slot *s = &w->backends[b].slots[i];

			if (s->waiting)
				wk_give_back(w, s);
		}
	}
	if (wk_idle(w)) {
		event_base_loopexit(w->base, NULL);
		return;
	}
	evtimer_add(w->grace, &tv);
}

/* One pool of tier t's image (NULL: the tier has none) of size n. */
static void start_pool(struct worker *w, const struct al_tier_policy *t, struct backend_state *be,
		       const char *image, uint32_t n)
{
	struct al_pool_spec ps = {
	    .tier = t->name,
	    .size = n,
	    .memory_bytes = t->defaults.memory_bytes,
	    .cpu_millis = t->cpu_millis,
	    .image = image,
	    .guest = t->guest,
	    .max_idle_ms = t->pool_max_idle_ms,
	};
	struct al_err err = {0};

	if (!be->ops->pool) {
		al_log("warn", "pool_unsupported", "tier=%s backend=%s", t->name, be->ops->name);
		return;
	}
	if (be->ops->pool(&w->conf->backend, &ps, &err))
		al_log("error", "pool", "tier=%s image=%s backend=%s why=\"%s\"", t->name,
		       image ? image : "none", be->ops->name, err.msg);
	else
		al_log("info", "pool", "tier=%s image=%s backend=%s size=%u", t->name,
		       image ? image : "none", be->ops->name, n);
}

/* Warm pools: the default image's (pool: N) and each image's own
 * (pool: {image: N}). */
void wk_start_pools(struct worker *w)
{
	for (size_t i = 0; i < w->policy.ntiers; i++) {
		const struct al_tier_policy *t = &w->policy.tiers[i];
		struct backend_state *be = wk_backend_for(w, t->backend);

		if (!wk_serves(w, t->name) || !be || !be->ok)
			continue;
		if (t->pool)
			start_pool(w, t, be, t->image, t->pool);
		for (size_t k = 0; k < t->nimages; k++)
			if (t->pools[k])
				start_pool(w, t, be, t->images[k], t->pools[k]);
	}
}
