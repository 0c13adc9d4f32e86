/* service.h - the worker service: pulls jobs of the tiers it serves from
 * Redis, runs each on its tier's backend in a slot, commits exactly one
 * result per job, renews leases, obeys cancels and drains on SIGTERM. */
#ifndef AL_SERVICE_H
#define AL_SERVICE_H

#include <stdint.h>

#include "../backends/backend.h"
#include "../common/policy.h"

#define AL_HOLD_MAX_MS 1000 /* a job held ahead (prefetch) longer goes back to the queue */
/* --prefetch auto: places per backend, and the expected wait of a held job
 * they are sized to (its slots' recent run times) */
#define AL_PREFETCH_AUTO_MAX 16
#define AL_PREFETCH_WAIT_US  5000

struct wk_worker_conf {
	const char *redis_url;		 /* redis://... or unix:///... */
	const char *policy_path;	 /* NULL = built-in policy */
	const char *tiers[AL_TIERS_MAX]; /* tiers served; empty = every tier in the policy */
	unsigned ntiers;
	unsigned slots;			 /* concurrent jobs per backend */
	unsigned prefetch;		 /* places per backend: jobs claimed ahead of a free slot */
	bool prefetch_auto;		 /* ...used as the slots' run times say (fetch.c) */
	uint64_t heartbeat_ms;		 /* lease renewal and liveness period */
	uint64_t drain_grace_ms;	 /* SIGTERM: time running jobs get to finish */
	const char *webhook_secret;	 /* HMAC key for callback signatures; NULL = unsigned */
	const char *webhook_secrets_dir; /* per tenant instead: <dir>/<tenant> (webhook.h) */
	bool allow_noop;		 /* offer the benchmark-only noop backend */
	bool no_live_output;		 /* --live-output off: no al:out:<id> chunks */
	struct al_backend_conf backend;	 /* shared with every backend */
};

/* Run until drained (SIGTERM/SIGINT). Returns the process exit code: 2
 * with *err saying why when the worker could not start. */
int wk_worker_run(const struct wk_worker_conf *conf, struct al_err *err);

#endif
