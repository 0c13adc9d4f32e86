/* sched.h - the scheduler's own state and the calls between its parts (not
 * an interface for anything outside scheduler/).
 *
 *   main.c       the loop: ticks, connections, signals, options, start-up
 *   admission.c  intake -> ADMIT against the policy, or refusal; cancel requests
 *   reclaim.c    dead workers' jobs, due retries, deadlines
 *   metrics.c    the snapshot and its HTTP endpoint
 *   results.c    calls, acks, dead letters, results the scheduler commits
 *   vmlease.c    service-VM leases (with --libvirt)
 */
#ifndef AL_SCHED_H
#define AL_SCHED_H

#include <event2/event.h>
#include <event2/http.h>
#include <hiredis/async.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/aconn.h"
#include "../common/policy.h"
#include "../proto/contract.h"
#include "../proto/result.h"
#include "vmlease.h"

#define INTAKE_BATCH "256"
#define TICK_MS	     100

struct sched {
	struct event_base *base;
	struct al_policy policy;
	const char *policy_path;
	struct al_redis_url url;
	struct al_aconn *cmd, *fetch;
	char id[80];
	bool fetching;
	bool stopping;
	struct event *tick, *sighup, *sigterm, *sigint;
	struct evhttp *http;
	uint64_t last_reclaim_ms, last_snapshot_ms, last_vm_ms;
	const char *libvirt_uri; /* service VMs' libvirt, or NULL */
	struct sc_vmlease *vms;
	bool reconciled;
	uint64_t up_ms; /* monotonic ms when the command connection was last up */
	bool read_own;	/* this run's own pending intake entries were read */
	/* metrics snapshot, refreshed once a second */
	char *metrics;
	bool redis_ok;
	uint64_t admitted, rejected, reclaimed, lost, expired;
	/* Redis's clock (TIME), carried on by the monotonic one between reads:
	 * deadlines and due retries are judged by it, not by this host's */
	uint64_t redis_ms, redis_at_mono; /* 0: not read yet */
	uint64_t last_time_mono;
	uint64_t skew_logged_mono; /* a clock_skew line at most once a minute */
	uint64_t redis_step_mono;  /* when Redis's clock last jumped (over 1 s) */
	/* workers' liveness by their heartbeat counter ("beat" in al:workers),
	 * timed on this scheduler's monotonic clock: no wall clock decides
	 * whether a worker's jobs are taken from it */
	struct sc_beat *beats;
	size_t nbeats, capbeats;
};

struct sc_beat {
	char worker[AL_ID_MAX + 1];
	uint64_t beat;	     /* the last counter seen */
	uint64_t changed_ms; /* monotonic: when it last moved (or was first seen) */
	bool seen;	     /* in the last read of al:workers */
};

/* Unix ms by Redis's clock (this host's until Redis's was read). */
uint64_t sc_now_ms(const struct sched *s);
/* Read Redis's TIME now (a jump of it is noted before later replies). */
void sc_read_time(struct sched *s);

/* results.c */
void sc_on_reply_log(redisAsyncContext *ac, void *reply, void *priv);
void sc_call(struct sched *s, struct al_call *c, const char *what);
void sc_ack_intake(struct sched *s, const char *entry);
void sc_dead_letter(struct sched *s, const char *source, const char *entry, const char *reason,
		    const char *id, const char *raw, size_t rawlen);
/* Commit the scheduler's own result for a job: attempt -1, the rejection of
 * the intake entry `entry` (REJECT); else worker_lost of that attempt
 * (COMMIT, acknowledging entry in stream/group). quota:
 * the tenant quota that refused it ("max_queued", "rate_per_s"; info.quota)
 * or NULL. */
void sc_commit(struct sched *s, const char *id, long attempt, enum al_status_code st,
	       const char *msg, const char *quota, const char *stream, const char *entry,
	       const char *group, const char *raw, size_t rawlen);

/* admission.c */
void sc_maybe_fetch(struct sched *s);
void sc_on_own_pending(redisAsyncContext *ac, void *reply, void *priv);
void sc_on_intake_claimed(redisAsyncContext *ac, void *reply, void *priv);

/* reclaim.c */
void sc_reclaim(struct sched *s);
void sc_on_due_deadlines(redisAsyncContext *ac, void *reply, void *priv);

/* metrics.c */
void sc_snapshot(struct sched *s);
void sc_on_http(struct evhttp_request *req, void *arg);

#endif
