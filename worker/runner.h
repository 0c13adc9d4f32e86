/* runner.h - runs one job through a backend on the worker's libevent loop:
 * prepare, start, watch the backend's fds, enforce the wall-clock limit,
 * cancel, reap, destroy, and hand back one result. */
#ifndef AL_RUNNER_H
#define AL_RUNNER_H

#include <event2/event.h>

#include "../backends/backend.h"
#include "../common/log.h"
#include "../common/policy.h"

struct wk_runner;

/* Called once per runner with its result (owned by the runner, valid until
 * wk_runner_free). The sandbox is already destroyed when this runs. */
typedef void (*wk_runner_done_fn)(struct wk_runner *r, struct al_result *res, void *arg);

/* Start spec->job on ops. Returns NULL only when out of memory; any sandbox
 * failure arrives through done as a sandbox_error (or rejected) result. */
struct wk_runner *wk_runner_start(struct event_base *base, const struct al_backend_ops *ops,
				  const struct al_backend_conf *conf,
				  const struct al_run_spec *spec, wk_runner_done_fn done,
				  void *arg);

/* Kill the job now; its result gets status why (AL_ST_CANCELLED, or
 * AL_ST_SANDBOX_ERROR when a draining worker gives the job back). */
void wk_runner_stop(struct wk_runner *r, enum al_status_code why, const char *msg);

/* Live output: fn gets each new piece of the job's stdout (stream 1) or
 * stderr (2), in order, at most AL_OUT_CHUNK_MAX bytes a call and never past
 * the job's caps: polled while it runs (backends with an output slot), then,
 * before done, the rest from its result. Set it right after start. */
typedef void (*wk_runner_output_fn)(struct wk_runner *r, int stream, const void *data, size_t len,
				    void *arg);
void wk_runner_on_output(struct wk_runner *r, wk_runner_output_fn fn);

/* The job ended because its sandbox could not be made or started (on the
 * host: not anything the job did, as a guest's misbehaviour after start). */
bool wk_runner_setup_failed(const struct wk_runner *r);
/* ...because the host's input cache had no room for its inputs. */
bool wk_runner_cache_full(const struct wk_runner *r);
void wk_runner_free(struct wk_runner *r);
/* spec's network egress from the tier and the job: the job's own
 * egress_allow rules (parsed into narrowed, AL_EGRESS_RULES_MAX of them,
 * *nnarrowed set), else the tier's; its caps and cache. */
struct al_egress_rule;
void wk_run_spec_egress(const struct al_tier_policy *t, const struct al_job *job,
			struct al_egress_rule *narrowed, size_t *nnarrowed,
			struct al_run_spec *spec);
/* The egress proxy of spec's sandbox (a job's, or a session's) on the
 * backend's w->egress_fd (taken): the spec's rules and caps, its tenant's
 * cache on the tier; NULL when it cannot start. */
struct al_watch;
struct wk_proxy *wk_runner_proxy(struct event_base *base, const struct al_backend_ops *ops,
				 const struct al_backend_conf *conf, const struct al_run_spec *spec,
				 struct al_watch *w);

/* The run spec of job (admitted to tier t) in slot: limits, image, tier's
 * environment, binds, network and VM settings; all but the egress rules,
 * which the caller narrows to the job's. */
void wk_run_spec_of(const struct al_tier_policy *t, const struct al_job *job, unsigned slot,
		    struct al_run_spec *spec);

#endif
