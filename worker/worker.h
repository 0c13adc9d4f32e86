/* worker.h - the worker service's own state and the calls between its
 * parts (not an interface for anything outside worker/). One libevent loop,
 * three Redis connections ("cmd" for scripts and heartbeats, "fetch" for
 * the blocking XREADGROUP, "sub" for the cancel channel), slots per backend.
 *
 * A job's path, bottom first; a part calls only parts listed before it
 * (tests/integration/layers.py checks it), never one after:
 *
 *   commit.c   what must reach Redis: reliable calls, the commit queue
 *              (results wait there until Redis answers), acks, retries,
 *              dead letters
 *   slots.c    the slot table: slots and places, release, hold, give back
 *   health.c   a backend that keeps failing to set up sandboxes: paused,
 *              probed, resumed
 *   session_calls.c  a session's calls run, timed, interrupted, answered
 *   session_pause.c  a session paused or forked into a snapshot
 *   session_resume.c a paused session restored; paused sessions' time
 *              and files
 *   sessions.c sessions: a slot's sandbox kept for a tenant's calls
 *   jobs.c     running a job: admission re-check, the runner, its result,
 *              held jobs started in freed slots, histograms
 *   fetch.c    taking jobs: FETCH and CLAIM scripts, the blocking read
 *   control.c  cancel, heartbeats (leases, registry, metrics), connection
 *              events, drain on SIGTERM, warm pools
 *   service.c  start-up and wiring: backends, connections, timers, signals;
 *              the loop pass
 *
 * What a lower part needs done by a higher one (a freed slot wants its
 * backend's held jobs started and a fetch; an answered call wants the
 * drain checked) it asks of the loop pass, wk_pass_want: the one call that
 * goes the other way, through an event service.c runs at the end of the
 * loop's pass. Beside them, used by all: runner.c  one job through one
 * backend (runner.h)
 *   grading.c  a grading job's build tree and steps (grading.h)
 *   proxy.c    the egress proxy of jobs granted network (proxy.h)
 *   webhook.c  result callbacks (webhook.h); hostlock.c  one worker id per host
 */
#ifndef AL_WORKER_H
#define AL_WORKER_H

#include <event2/event.h>
#include <hiredis/async.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/aconn.h"
#include "../common/policy.h"
#include "../proto/contract.h"
#include "../proto/call.h"
#include "runner.h"
#include "service.h"
#include "webhook.h"

#define FETCH_BLOCK_MS "1000"
#define FETCH_DEPTH    2 /* fetch scripts in flight at once: Redis works while the worker does */
#define MAX_STREAMS    (AL_TIERS_MAX * AL_BANDS)

struct worker;
struct wk_session;

/* What rides on the last COMMIT of a flush: the fetch of the slots its
 * results freed (fetch.c's wk_fetch_rider, set at start-up in
 * worker.commit_rider), so that commit.c, below fetch.c on a job's path,
 * calls nothing of it by name. attach adds its part to COMMIT call c of
 * nresults results and says how many slots it reserved (0: nothing added,
 * c stays a plain COMMIT); answered gets its half of the answer (NULL: none
 * came) with that number. */
struct wk_rider {
	unsigned (*attach)(struct worker *w, struct al_call *c, int nresults);
	void (*answered)(struct worker *w, const redisReply *r, unsigned n);
};
extern const struct wk_rider wk_fetch_rider;

/* A backend has conf->slots slots that run jobs and, after them,
 * conf->prefetch places that only hold a claimed job (fetched ahead with
 * --prefetch) until a slot of the backend frees. Both are struct slot. */
struct slot {
	struct worker *w;
	int index; /* slot number within its backend (places: >= slots) */
	const struct al_backend_ops *ops;
	struct backend_state *be;
	bool busy;
	bool waiting;	  /* a place holding a claimed job */
	uint64_t held_ms; /* since when */
	uint64_t seq;	  /* order of arrival among held jobs */
	int band;	  /* its queue's band (0 high): held jobs start by band, then seq */
	/* the job in this slot */
	char id[AL_ID_MAX + 1];
	char stream[AL_KEY_MAX];
	char entry[64];
	unsigned attempt;
	const struct al_tier_policy *tier;
	struct al_job job;
	bool have_job;
	struct wk_runner *runner;
	bool released;		    /* drain gave it back: retry, do not commit */
	struct wk_session *session; /* a session's job: the session it holds */
	bool out_ttl_set;	    /* live output: its stream has an entry (and a TTL) */
	uint64_t run_us;	    /* monotonic: when its job started (0: not running) */
	/* network egress: the job's egress_allow, parsed (admitted: within
	 * its tier's rules) */
	struct al_egress_rule egress[AL_EGRESS_RULES_MAX];
	size_t negress;
};

struct backend_state {
	const struct al_backend_ops *ops;
	bool ok;		  /* self-check passed */
	char why[AL_ERR_MSG_MAX]; /* why not */
	struct slot *slots;	  /* conf->slots slots, then conf->prefetch places */
	bool hold_off;		  /* a held job went back: fetch no more ahead until a slot frees */
	bool dispatch_wanted;	  /* a slot freed: start its held jobs (the loop pass) */
	uint64_t run_us_avg;	  /* its jobs' recent run time (moving average; 0: none yet) */
	/* health.c: set-up failures in a row, and the pause they bring */
	struct worker *w;
	unsigned setup_failures;
	bool paused;			/* takes no jobs until a probe runs */
	char pause_why[AL_ERR_MSG_MAX]; /* the last set-up failure */
	uint64_t probe_at_ms;		/* monotonic: the next probe */
	struct wk_runner *probe;	/* the probe running, or NULL */
	bool probe_over;		/* ...and ended: freed on the next tick */
	unsigned probe_slot;
	struct al_job probe_job;
};

#define AL_SETUP_FAILS_MAX 3	/* sandbox_errors in a row that pause a backend */
#define AL_PROBE_EVERY_MS  5000 /* a paused backend's probe, this often */

/* A finished job's result, kept until a COMMIT answer says committed,
 * stale or duplicate. */
struct commit {
	struct commit *next;
	char id[AL_ID_MAX + 1];
	long attempt; /* the fencing number it was claimed with */
	char *result; /* msgpack result */
	size_t len;
	char stream[AL_KEY_MAX]; /* the entry to acknowledge ("" when none) */
	char entry[64];
	enum al_status_code status; /* the result's, for COMMIT's counters */
	char *callback;		    /* POST the result here once committed, or NULL */
	char tenant[AL_ID_MAX + 1]; /* ...signed with this tenant's webhook secret */
};

/* Queue-wait and run-time histograms, summed here and added to Redis at
 * each heartbeat (al:hist:<tier>:<backend>), off the per-job path. */
#define HIST_BOUNDS 13
struct hist {
	char key[AL_KEY_MAX];		/* al:hist:<tier>:<backend> */
	uint64_t n[2][HIST_BOUNDS + 1]; /* [wait/run][bucket], last = +Inf */
	uint64_t sum_ms[2];
};

/* A policy a reload replaced: the slots, sessions and pools that started
 * under it still point into it, so it is kept until the worker exits (a
 * few KiB each). */
struct wk_retired {
	struct wk_retired *next;
	struct al_policy policy;
};

struct worker {
	const struct wk_worker_conf *conf;
	struct al_policy policy;    /* in force: new jobs are checked against it */
	struct wk_retired *retired; /* the ones SIGHUP replaced */
	struct event_base *base;
	struct al_redis_url url;
	struct al_aconn *cmd, *fetch, *sub;
	struct al_aconn *sessq;	     /* the sessions' calls (BLPOP al:wq:<worker>) */
	struct wk_session *sessions; /* open (and opening) */
	bool calls_waiting;	     /* a BLPOP on sessq */
	/* sessions this worker paused lately: a call that was on its way to
	 * one here goes back to the record, which resumes it */
	char paused_ids[64][AL_ID_MAX + 1];
	unsigned paused_at;
	bool snaps_swept;	  /* the half-written snapshots of an earlier run removed */
	uint64_t paused_due_mono; /* paused sessions past their time last looked for */
	uint64_t orphans_mono;	  /* snapshots no paused session names last looked for */
	/* a paused session waits on one of this worker's resume queues (their
	 * lengths, looked at with the above): a fetch leaves it a free slot */
	bool resumes_waiting;
	struct backend_state backends[8];
	int nbackends;
	const char *streams[MAX_STREAMS];
	struct backend_state *stream_be[MAX_STREAMS]; /* the backend of each stream's tier */
	char stream_buf[MAX_STREAMS][AL_KEY_MAX];
	int nstreams;
	const struct wk_rider *commit_rider; /* on the last COMMIT of a flush, or NULL */
	unsigned fetch_inflight; /* fetch scripts on the command connection (<= FETCH_DEPTH) */
	unsigned fetch_reserved; /* slots those may fill */
	bool block_fetching;	 /* a blocking read on the fetch connection */
	bool draining;
	int exit_code;
	struct commit *commits, **commits_tail; /* results not sent yet */
	unsigned commit_batches;		/* COMMIT calls not answered yet */
	unsigned inflight;			/* reliable calls not answered yet */
	struct wk_webhooks *hooks;
	struct event *pass_ev; /* the loop pass (service.c): what pass_wants asks */
	unsigned pass_wants;   /* WK_PASS_* */
	struct hist hists[16];
	int nhists;
	struct event *hb, *sigterm, *sigint, *sighup, *grace;
	uint64_t jobs_done;
	uint64_t held_seq;
	uint64_t beats; /* heartbeats sent: the scheduler's sign of life (no clock) */
	/* health.c: the input cache full: jobs with inputs wait, unspent */
	bool inputs_full;
	char inputs_why[AL_ERR_MSG_MAX];
};

/* The loop pass: at the end of the loop's pass, in this order, start the
 * held jobs of backends with dispatch_wanted (WK_PASS_DISPATCH), send the
 * commit queue (FLUSH: results finishing together go out in one call), end
 * the loop if draining and idle (EXIT), fetch (FETCH: every slot freed in
 * the pass counts in one fetch, which goes out behind the results). */
enum { WK_PASS_DISPATCH = 1, WK_PASS_FLUSH = 2, WK_PASS_EXIT = 4, WK_PASS_FETCH = 8 };

static inline void wk_pass_want(struct worker *w, unsigned what)
{
	bool armed = w->pass_wants != 0;

	w->pass_wants |= what;
	if (!armed && w->pass_ev)
		event_active(w->pass_ev, 0, 0);
}

static inline bool wk_health_paused(const struct backend_state *be)
{
	return be->paused;
}

/* commit.c */
void wk_send_call(struct worker *w, struct al_call *call, const char *what, const char *id);
/* One live-output entry of job or call id (PROTOCOL.md, "Live output"):
 * t type, its bytes; the first (*ttl_set false, then true) gives the
 * stream ttl_ms, until the result's script gives it the result's. */
void wk_send_output(struct worker *w, const char *id, unsigned attempt, const char *type,
		    const void *data, size_t len, bool *ttl_set, uint64_t ttl_ms);
void wk_commit_free(struct commit *c);
void wk_flush_commits(struct worker *w);
bool wk_commits_may_wait(const struct worker *w);
/* job: the callback URL and tenant (NULL: no callback) */
void wk_commit_result(struct worker *w, const struct al_result *res, const char *stream,
		      const char *entry, long attempt, const struct al_job *job);
void wk_commit_status(struct worker *w, const char *id, const char *stream, const char *entry,
		      long attempt, enum al_status_code st, const char *msg);
void wk_retry_later(struct worker *w, struct slot *s, uint64_t delay_ms, bool bump);
void wk_ack(struct worker *w, const char *stream, const char *entry, const char *id);
void wk_dead_letter(struct worker *w, const char *stream, const char *entry, const char *reason,
		    const char *id, const char *raw, size_t rawlen);

/* health.c: a backend that keeps failing to set up sandboxes is paused */
/* setup_failed: the sandbox could not be made (wk_runner_setup_failed) */
void wk_health_note(struct worker *w, struct backend_state *be, const struct al_result *res,
		    bool setup_failed);
void wk_health_tick(struct worker *w); /* each heartbeat: probes, resumes */
/* The host's input cache had no room for s's inputs (why): s goes back
 * for later, its attempt unspent, and jobs with inputs wait so until the
 * cache has room (wk_inputs_room); jobs without run on. Releases s. */
void wk_inputs_full(struct worker *w, struct slot *s, const char *why);
/* true when s may start: it needs no inputs, or the input cache has room;
 * else s goes back for later, unspent, and is released. */
bool wk_inputs_room(struct worker *w, struct slot *s);
/* "name":"why",... of the paused backends into out; the length */
int wk_health_json(const struct worker *w, char *out, size_t cap);
void wk_health_free(struct worker *w);

/* slots.c */
unsigned wk_nplaces(const struct worker *w);
bool wk_is_place(const struct slot *s);
unsigned wk_busy_slots(struct worker *w);
unsigned wk_held_jobs(struct worker *w);
bool wk_idle(struct worker *w);
/* Whether the worker serves tier (--tiers names it, or no --tiers). */
bool wk_serves(const struct worker *w, const char *tier);
struct backend_state *wk_backend_for(struct worker *w, const char *name);
/* Empty slot s; a slot (not a place) asks for its backend's held jobs. */
void wk_slot_release(struct slot *s);
void wk_give_back(struct worker *w, struct slot *p);
void wk_hold(struct worker *w, struct slot *p);

/* sessions.c: sessions (proto/call.h) */
/* Slot s holds an accepted session job: start its sandbox and server. */
struct wk_restore;
void wk_session_start(struct worker *w, struct slot *s, const struct wk_restore *rs);
/* The worker drains: an idle session on a tier whose sessions pause when
 * idle (on_idle: pause) is paused, to be resumed by this worker when it
 * runs again or by any of the tier's that reach its snapshot_dir; the
 * others end (worker_stop). */
void wk_sessions_drain(struct worker *w);
void wk_sessions_on_up(struct al_aconn *c, void *arg); /* sessq: wait for calls */
void wk_sessions_renew(struct worker *w);	       /* each heartbeat: leases */
void wk_sessions_end_all(struct worker *w, enum al_sess_end why);
void wk_session_cancel(struct slot *s); /* its open job was cancelled */
/* s holds a session not open yet: its job's lease is still renewed */
bool wk_session_opening(const struct slot *s);

/* jobs.c */
void wk_dispatch_held(struct worker *w, struct backend_state *be);
void wk_hist_flush(struct worker *w);
int wk_job_accept(struct worker *w, struct slot *s, const char *raw, size_t rawlen,
		  struct al_err *err);
void wk_job_run(struct worker *w, struct slot *s);

/* fetch.c */
void wk_maybe_fetch(struct worker *w);
bool wk_fetch_due(struct worker *w);

/* control.c */
void wk_heartbeat(evutil_socket_t fd, short what, void *arg);
void wk_on_cmd_up(struct al_aconn *c, void *arg);
void wk_on_conn_down(struct al_aconn *c, void *arg);
void wk_on_fetch_up(struct al_aconn *c, void *arg);
void wk_on_sub_up(struct al_aconn *c, void *arg);
void wk_on_grace(evutil_socket_t fd, short what, void *arg);
void wk_on_signal(evutil_socket_t sig, short what, void *arg);
void wk_on_hup(evutil_socket_t sig, short what, void *arg); /* logs, keeps running */
void wk_start_pools(struct worker *w);

#endif
