/* runner.c - one job through one backend on the event loop (see runner.h). */
#include "runner.h"
#include "egress_ca.h"

#include <errno.h>
#include <event2/dns.h>
#include <limits.h>
#include <unistd.h>

#include "../common/cleanup.h"
#include "../backends/judge.h"
#include "../backends/jobfs.h"
#include "../proto/keys.h"
#include "proxy.h"
#include "grading.h"
#include "instage.h"
#include "../common/clock.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KILL_GRACE_MS 2000 /* after a kill, wait this long for reap, then give up */

struct wk_runner {
	struct event_base *base;
	const struct al_backend_ops *ops;
	const struct al_backend_conf *conf;
	unsigned slot;
	struct al_sandbox *sb;
	bool setup_failed; /* the sandbox could not be made or started */
	bool cache_full;   /* ...for want of room in the host's input cache */
	struct event *watch[AL_WATCH_MAX];
	int nwatch;
	struct event *timer;	 /* wall-clock limit, then the kill grace */
	struct event *poll;	 /* every AL_USAGE_POLL_MS: CPU time and output so far */
	struct event *finish_ev; /* runs finish() outside the caller's stack */
	wk_runner_done_fn done;
	void *arg;
	struct al_result res;
	uint64_t start_mono; /* the job's start */
	uint64_t step_mono;  /* the sandbox's (a grading job has one per step) */
	bool stopping;	     /* a kill was sent */
	int reason;	     /* -1, or the status a stop imposes */
	char reason_msg[256];
	bool finished;
	struct wk_proxy *egress;    /* network egress: the job's proxy */
	uint64_t egress_keep_ms;    /* ...serving on after an ok result (al_watch) */
	wk_runner_output_fn out_fn; /* live output, or NULL */
	uint64_t sent[3];	    /* bytes of stdout [1] and stderr [2] given to it */
	struct wk_grading *grading; /* a grading job run step by step, or NULL */
	struct wk_instage *inputs;  /* the job's inputs by URL being fetched, or NULL */
	struct al_run_spec spec;    /* ...and the spec its sandbox then gets */
	const struct al_job *job;   /* the whole job (a grading job's: for its score) */
};

static void start_step(struct wk_runner *r, const struct al_run_spec *spec);

static ssize_t read_backend(void *sb, int stream, uint64_t off, void *buf, size_t cap)
{
	return al_backend_output(sb, stream, off, buf, cap);
}

static int to_out_fn(void *r, int stream, const void *data, size_t len)
{
	struct wk_runner *run = r;

	run->out_fn(run, stream, data, len, run->arg);
	return 0;
}

/* The rest of each stream, from the result (what the job wrote last). */
static void flush_output(struct wk_runner *r)
{
	const struct al_bytes *b[3] = {NULL, &r->res.out, &r->res.err};

	for (int st = 1; st <= 2; st++)
		while (b[st]->len > r->sent[st]) {
			size_t n = b[st]->len - r->sent[st];

			if (n > AL_OUT_CHUNK_MAX)
				n = AL_OUT_CHUNK_MAX;
			r->out_fn(r, st, (const char *)b[st]->data + r->sent[st], n, r->arg);
			r->sent[st] += n;
		}
}

/* One resolver for the worker's loop (the egress proxies share it): the
 * host's resolv.conf and hosts file, made at the first job that needs it. */
static struct evdns_base *dns_of(struct event_base *base)
{
	static struct evdns_base *dns;
	static struct event_base *for_base;

	if (!dns || for_base != base) {
		dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
		if (!dns) /* no resolv.conf: names fail, ranges still work */
			dns = evdns_base_new(base, 0);
		for_base = base;
	}
	return dns;
}

void wk_run_spec_egress(const struct al_tier_policy *t, const struct al_job *job,
			struct al_egress_rule *narrowed, size_t *nnarrowed,
			struct al_run_spec *spec)
{
	/* the job's narrowed rules (admission checked them), else the tier's */
	*nnarrowed = 0;
	for (size_t i = 0; i < job->negress_allow && i < AL_EGRESS_RULES_MAX; i++)
		if (!al_egress_rule_parse(job->egress_allow[i], &narrowed[*nnarrowed], NULL))
			(*nnarrowed)++;
	if (job->negress_allow) { /* inputs by URL come through them too */
		spec->input_rules = narrowed;
		spec->ninput_rules = *nnarrowed;
	}
	if (job->network == AL_NET_EGRESS) {
		spec->egress_rules = job->negress_allow ? narrowed : t->egress_rules;
		spec->negress_rules = job->negress_allow ? *nnarrowed : t->negress_rules;
		spec->egress_max_bytes = t->egress_max_bytes;
		spec->egress_max_connections = t->egress_max_connections;
		spec->egress_max_open = t->egress_max_open;
		spec->egress_cache_bytes = t->egress_cache_bytes;
	}
}

struct wk_proxy *wk_runner_proxy(struct event_base *base, const struct al_backend_ops *ops,
				 const struct al_backend_conf *conf, const struct al_run_spec *spec,
				 struct al_watch *w)
{
	struct wk_proxy *e = wk_proxy_new(
	    base, dns_of(base), al_take_fd(&w->egress_fd), spec->egress_rules, spec->negress_rules,
	    spec->egress_max_bytes, spec->egress_max_connections, spec->egress_max_open, 0);

	if (e && w->egress_unix_clients)
		wk_proxy_unix_clients(e);

	if (e && spec->egress_cache_bytes) {
		/* each tenant's own, per tier: no job sees it, no tenant reads
		 * another's (names are [A-Za-z0-9._:-], "t-" keeps ".." a name) */
		char dir[PATH_MAX];
		const char *sd = conf->state_dir ? conf->state_dir : "/var/lib/airlock";

		if (al_pathf(dir, sizeof(dir), "%s/egress-cache/%s/t-%s", sd, spec->job->tier,
			     spec->job->tenant ? spec->job->tenant : "default") ||
		    al_mkdir_p(dir, 0700) || wk_proxy_set_cache(e, dir, spec->egress_cache_bytes))
			al_log("warn", "egress_cache",
			       "job=%s dir=%s note=\"no cache for this job: %s\"", spec->job->id,
			       dir, strerror(errno));
		/* https too, where the job got the bundle that trusts the CA */
		else if (spec->cache_ca_file && (ops->caps & AL_CAP_FILES) &&
			 wk_proxy_set_intercept(e, spec->ca_file))
			al_log("warn", "egress_cache",
			       "job=%s note=\"its https is not cached: the proxy cannot end it\"",
			       spec->job->id);
	}
	return e;
}

static void finish(struct wk_runner *r)
{
	if (r->finished)
		return;
	r->finished = true;
	for (int i = 0; i < r->nwatch; i++)
		event_free(r->watch[i]);
	r->nwatch = 0;
	if (r->timer)
		event_del(r->timer);
	if (r->poll)
		event_del(r->poll);
	if (r->reason >= 0) { /* Airlock ended it: whatever it exited with is not its own end */
		r->res.status = (enum al_status_code)r->reason;
		r->res.has_exit_code = false;
		r->res.exit_code = 0;
		al_result_set_error(&r->res, "%s", r->reason_msg);
	}
	if (r->egress && r->egress_keep_ms && r->res.status == AL_ST_OK) {
		/* a service VM lives on: so does its proxy, for the lease's maximum */
		wk_proxy_keep(r->egress, &r->res, r->egress_keep_ms, r->res.id ? r->res.id : "?");
		r->egress = NULL;
	} else if (r->egress) { /* the transcript, once nothing of the job can connect */
		wk_proxy_finish(r->egress, &r->res);
	}
	r->res.finished_ms = al_now_ms();
	if (r->step_mono) /* a grading job's step: its own */
		r->res.wall_ms = al_mono_ms() - r->step_mono;
	/* Nothing of the job outlives it: the sandbox goes before the result. */
	al_sandbox_free(r->sb);
	r->sb = NULL;
	event_active(r->finish_ev, 0, 0);
}

struct refill {
	const struct al_backend_ops *ops;
	const struct al_backend_conf *conf;
	unsigned slot;
};

static void on_refill(evutil_socket_t fd, short what, void *arg)
{
	struct refill *f = arg;

	(void)fd;
	(void)what;
	f->ops->refill(f->conf, f->slot);
	free(f);
}

/* A grading job's step is over: keep its verdict and start the next step;
 * false when the job is over (r->res is then its result). A cancel, a
 * drain or a sandbox failure ends the job with that status. */
static bool next_step(struct wk_runner *r)
{
	struct al_result *res = &r->res;
	const struct al_run_spec *next;
	char *id = res->id, *backend = res->backend, *worker = res->worker;
	uint64_t started = res->started_ms;
	uint32_t attempt = res->attempt;

	if (res->status == AL_ST_CANCELLED || res->status == AL_ST_SANDBOX_ERROR ||
	    res->status == AL_ST_REJECTED)
		return false;
	if (wk_grading_step_done(r->grading, res))
		goto fail_oom;
	/* the next step starts from an empty result */
	res->id = res->backend = res->worker = NULL;
	al_result_free(res);
	*res = (struct al_result){.version = AL_PROTO_VERSION,
				  .id = id,
				  .attempt = attempt,
				  .backend = backend,
				  .worker = worker,
				  .started_ms = started};
	if ((next = wk_grading_next(r->grading))) {
		r->finished = r->stopping = false;
		r->reason = -1;
		start_step(r, next);
		return true;
	}
	if (wk_grading_result(r->grading, res))
		goto fail_oom;
	res->finished_ms = al_now_ms();
	res->wall_ms = al_mono_ms() - r->start_mono;
	return false;
fail_oom:
	res->status = AL_ST_SANDBOX_ERROR;
	al_result_set_error(res, "runner: out of memory while grading");
	return false;
}

static void on_finish(evutil_socket_t fd, short what, void *arg)
{
	struct wk_runner *r = arg;
	struct refill *f = r->ops->refill ? malloc(sizeof(*f)) : NULL;

	(void)fd;
	(void)what;
	/* The slot gets ready for its next job (or step) once this result is out. */
	if (f) {
		*f = (struct refill){r->ops, r->conf, r->slot};
		if (event_base_once(r->base, -1, EV_TIMEOUT, on_refill, f, NULL))
			free(f);
	}
	if (r->grading) {
		if (next_step(r))
			return;
		/* nothing of the job outlives it: its build tree goes before the result */
		wk_grading_free(r->grading);
		r->grading = NULL;
	}
	/* a grading job's score: the host's count, from the verdicts, on every
	 * backend (a microVM guest's word on it is not taken) */
	if (r->job && r->job->ntests &&
	    (r->res.status == AL_ST_OK || r->res.status == AL_ST_COMPILE_ERROR) &&
	    al_grade_score(&r->res, r->job))
		al_log("error", "grade_score", "job=%s note=\"out of memory: no score\"",
		       r->res.id ? r->res.id : "?");
	if (r->out_fn)
		flush_output(r);
	r->done(r, &r->res, r->arg); /* may free r */
}

static void fail(struct wk_runner *r, const struct al_err *err)
{
	r->res.status = err->code == AL_EINVAL ? AL_ST_REJECTED : AL_ST_SANDBOX_ERROR;
	al_result_set_error(&r->res, "%s", err->msg);
	finish(r);
}

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
	struct wk_runner *r = arg;
	struct al_err err = {0};
	int rc;

	(void)fd;
	(void)what;
	rc = al_backend_reap(r->sb, &r->res, &err);
	if (rc == 0)
		return;
	if (rc < 0 && r->reason < 0)
		fail(r, &err);
	else
		finish(r);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct wk_runner *r = arg;

	(void)fd;
	(void)what;
	if (!r->stopping) {
		snprintf(r->reason_msg, sizeof(r->reason_msg),
			 "wall-clock limit of %llu ms reached: the job was killed",
			 (unsigned long long)r->sb->spec.limits.wall_ms);
		wk_runner_stop(r, AL_ST_TIMEOUT, NULL);
		return;
	}
	/* The backend did not report the kill in time: destroy forces it. */
	finish(r);
}

/* Limits of the whole job, checked while it runs: CPU time of all its
 * processes together (RLIMIT_CPU counts one process only), output past its
 * caps (stopped at once, not when the disk limit is hit). */
static void on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct wk_runner *r = arg;
	const struct al_limits *l;
	struct al_usage u = {0};
	char msg[160];

	(void)fd;
	(void)what;
	if (r->stopping || r->finished || !r->sb)
		return;
	if (r->out_fn && !r->grading) /* what the job wrote since the last poll, within its caps */
		al_output_pump(&r->sb->spec.limits, r->sent, read_backend, r->sb, to_out_fn, r);
	if (al_backend_usage(r->sb, &u) < 0)
		return;
	l = &r->sb->spec.limits;
	if (u.cpu_ns / 1000000 >= l->cpu_ms) {
		snprintf(msg, sizeof(msg),
			 "CPU-time limit of %llu ms reached (all the job's processes together)",
			 (unsigned long long)l->cpu_ms);
		wk_runner_stop(r, AL_ST_CPU_LIMIT, msg);
	} else if (u.stdout_bytes > l->stdout_bytes || u.stderr_bytes > l->stderr_bytes) {
		bool out = u.stdout_bytes > l->stdout_bytes;

		snprintf(msg, sizeof(msg), "output limit reached: %s over its cap of %llu bytes",
			 out ? "stdout" : "stderr",
			 (unsigned long long)(out ? l->stdout_bytes : l->stderr_bytes));
		wk_runner_stop(r, AL_ST_OUTPUT_LIMIT, msg);
	}
}

void wk_runner_stop(struct wk_runner *r, enum al_status_code why, const char *msg)
{
	struct al_err err = {0};
	struct timeval tv = {KILL_GRACE_MS / 1000, (KILL_GRACE_MS % 1000) * 1000};

	if (r->finished || r->stopping)
		return;
	if (r->inputs && !r->sb) { /* still fetching its inputs: the fetcher goes */
		wk_instage_free(r->inputs);
		r->inputs = NULL;
	}
	r->stopping = true;
	r->reason = (int)why;
	if (msg)
		snprintf(r->reason_msg, sizeof(r->reason_msg), "%s", msg);
	if (!r->sb || al_backend_kill(r->sb, &err)) {
		finish(r);
		return;
	}
	evtimer_add(r->timer, &tv);
}

/* Start one sandbox for spec (the job, or a grading job's step); any
 * failure ends it through finish. */
static void start_step(struct wk_runner *r, const struct al_run_spec *spec)
{
	struct al_watch w = {.nfds = 0, .egress_fd = -1, .session_fd = -1};
	struct al_err err = {0};
	struct timeval tv;

	if (!(r->sb = al_sandbox_new(r->ops, r->conf, spec))) {
		err.code = AL_ENOMEM;
		snprintf(err.msg, sizeof(err.msg), "runner: out of memory");
		fail(r, &err);
		return;
	}
	if (al_backend_prepare(r->sb, &err)) {
		r->setup_failed = true;
		fail(r, &err);
		return;
	}
	r->step_mono = al_mono_ms();
	if (!r->start_mono)
		r->start_mono = r->step_mono;
	if (al_backend_start(r->sb, &w, &err)) {
		al_closep(&w.egress_fd);
		r->setup_failed = err.code != AL_EINVAL;
		fail(r, &err);
		return;
	}
	r->egress_keep_ms = w.egress_keep_ms;
	if (w.egress_fd >= 0 &&
	    !(r->egress = wk_runner_proxy(r->base, r->ops, r->conf, spec, &w))) {
		wk_runner_stop(r, AL_ST_SANDBOX_ERROR, "runner: cannot start the egress proxy");
		return;
	}
	for (int i = 0; i < w.nfds; i++) {
		r->watch[i] = event_new(r->base, w.fds[i], EV_READ | EV_PERSIST, on_ready, r);
		if (!r->watch[i] || event_add(r->watch[i], NULL)) {
			if (r->watch[i])
				event_free(r->watch[i]);
			wk_runner_stop(r, AL_ST_SANDBOX_ERROR, "runner: cannot watch the sandbox");
			return;
		}
		r->nwatch++;
	}
	{
		/* a whole grading job in one sandbox: every step's time */
		struct al_limits env;
		uint64_t wall;

		al_grade_envelope(spec->job, &spec->limits, &env);
		wall = (r->ops->caps & AL_CAP_GRADE_INSIDE ? env.wall_ms : spec->limits.wall_ms) +
		       w.setup_ms;
		tv.tv_sec = (time_t)(wall / 1000);
		tv.tv_usec = (suseconds_t)(wall % 1000) * 1000;
	}
	evtimer_add(r->timer, &tv);
	if (r->poll) {
		struct timeval pv = {0, AL_USAGE_POLL_MS * 1000};

		event_add(r->poll, &pv);
	}
}

/* The job's inputs are in its pack (or could not be): its sandbox now. */
static void inputs_done(void *arg, int status, const char *msg, const char *pack,
			const char *summary, bool cache_full)
{
	struct wk_runner *r = arg;
	struct al_err err = {.code = status == AL_ST_REJECTED ? AL_EINVAL : AL_ESYS};

	if (status != AL_ST_OK) {
		r->setup_failed = status != AL_ST_REJECTED;
		r->cache_full = cache_full;
		snprintf(err.msg, sizeof(err.msg), "%s", msg);
		fail(r, &err);
		return;
	}
	al_result_add_info(&r->res, "inputs", summary);
	r->spec.inputs_pack = pack;
	start_step(r, &r->spec);
}

struct wk_runner *wk_runner_start(struct event_base *base, const struct al_backend_ops *ops,
				  const struct al_backend_conf *conf,
				  const struct al_run_spec *spec, wk_runner_done_fn done, void *arg)
{
	struct wk_runner *r = calloc(1, sizeof(*r));
	struct al_err err = {0};
	const struct al_run_spec *first = spec;

	if (!r)
		return NULL;
	r->base = base;
	r->ops = ops;
	r->conf = conf;
	r->slot = spec->slot;
	r->done = done;
	r->arg = arg;
	r->reason = -1;
	r->res.version = AL_PROTO_VERSION;
	r->res.id = strdup(spec->job->id);
	r->res.attempt = spec->attempt;
	r->job = spec->job;
	r->res.backend = strdup(ops->name);
	r->res.worker = strdup(conf->worker_id);
	r->res.started_ms = al_now_ms();
	r->timer = evtimer_new(base, on_timer, r);
	r->poll = ops->usage || ops->output ? event_new(base, -1, EV_PERSIST, on_poll, r) : NULL;
	r->finish_ev = event_new(base, -1, 0, on_finish, r);
	if (!r->res.id || !r->res.backend || !r->res.worker || !r->timer || !r->finish_ev ||
	    ((ops->usage || ops->output) && !r->poll)) {
		wk_runner_free(r);
		return NULL;
	}
	/* A grading job on a backend that runs one command per sandbox: its
	 * build tree now, then a sandbox per step (next_step). */
	if (spec->job->ntests && !(ops->caps & AL_CAP_GRADE_INSIDE)) {
		if (!(ops->caps & AL_CAP_GRADE)) {
			al_err_set(&err, AL_EINVAL, "backend %s does not run grading jobs",
				   ops->name);
			fail(r, &err);
			return r;
		}
		if (!(r->grading = wk_grading_new(ops, conf, spec, &err)) ||
		    !(first = wk_grading_next(r->grading))) {
			fail(r, &err);
			return r;
		}
	}
	/* inputs fetched first, then the sandbox (inputs_done); so is the CA
	 * bundle of a job with egress on a tier with egress.ca_file or cache_https */
	if (spec->job->ninputs || (al_spec_ca_bundle(spec) && (ops->caps & AL_CAP_FILES))) {
		r->spec = *first;
		if (!(r->inputs = wk_instage_start(base, conf, &r->spec, inputs_done, r, &err))) {
			r->setup_failed = true;
			fail(r, &err);
		}
		return r;
	}
	start_step(r, first);
	return r;
}

void wk_runner_on_output(struct wk_runner *r, wk_runner_output_fn fn)
{
	r->out_fn = fn;
}

bool wk_runner_setup_failed(const struct wk_runner *r)
{
	return r->setup_failed;
}

bool wk_runner_cache_full(const struct wk_runner *r)
{
	return r->cache_full;
}

void wk_runner_free(struct wk_runner *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->nwatch; i++)
		event_free(r->watch[i]);
	if (r->timer)
		event_free(r->timer);
	if (r->poll)
		event_free(r->poll);
	if (r->finish_ev)
		event_free(r->finish_ev);
	al_sandbox_free(r->sb);
	wk_proxy_free(r->egress);
	wk_grading_free(r->grading);
	wk_instage_free(r->inputs);
	al_result_free(&r->res);
	free(r);
}

void wk_run_spec_of(const struct al_tier_policy *t, const struct al_job *job, unsigned slot,
		    struct al_run_spec *spec)
{
	spec->limits = job->limits;
	spec->cpu_millis = t->cpu_millis;
	spec->env = t->env;
	spec->nenv = t->nenv;
	spec->network = job->network;
	spec->image = job->image; /* admitted: one its tier offers, or its default */
	spec->guest = t->guest;
	spec->binds = t->binds;
	spec->nbinds = t->nbinds;
	spec->oci_runtime = t->oci_runtime;
	spec->oci_platform = t->oci_platform;
	spec->slot = slot;
	spec->vm_network = t->vm_network;
	spec->ports = t->ports;
	spec->nports = t->nports;
	spec->lease_ms = t->lease_ms;
	spec->max_lease_ms = t->max_lease_ms;
	spec->max_input_bytes = t->max_input_bytes;
	spec->ca_file = t->egress_ca_file;
	spec->cache_ca_file = t->egress_cache_https ? wk_egress_ca_file() : NULL;
	spec->input_rules = t->egress_rules;
	spec->ninput_rules = t->negress_rules;
}
