/* session_int.h - what a session's three files share, top down:
 * sessions.c (its life: start, open, end, the server's channel, its calls
 * taken from Redis), session_pause.c (paused: pause, fork, resume, their
 * end; docs/snapshots.md) and session_calls.c (its calls run, answered).
 * Each calls only those after it (the session's end reaches the lower two
 * as ss->end, a pause call session_calls.c as ss->pause). Internal to
 * worker/. */
#ifndef AL_SESSION_INT_H
#define AL_SESSION_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "../proto/call.h"
#include "worker.h"

#define HELLO_MS      30000 /* the server's first frame, after start */
#define INTERRUPT_MS  2000  /* a call interrupted at its time: this long to stop */
#define EXIT_WAIT_MS  1000  /* the server gone: this long for the sandbox's end */
#define RESTART_MS    10000 /* a killed interpreter: this long for the next one's hello */
#define FRAME_SLACK   (1u << 20)
#define CPU_POLL_MS   200   /* a call's CPU looked at this often (backends that report it) */
#define TRIM_EVERY_MS 30000 /* an idle session's sandbox trimmed at most this often */
#define SEEN_CALLS    4096  /* a session's last call ids, each run at most once */
/* a session's sandbox without a CPU budget: its CPU limit, ms */
#define NO_CPU_BUDGET_MS AL_LIMIT_WALL_MS_MAX /* a week: past any max_life_s */

struct pending {
	struct pending *next;
	struct al_sess_call call;
};

enum sess_state { SS_STARTING, SS_OPENING, SS_OPEN, SS_ENDED };

struct wk_session {
	struct wk_session *next;
	struct worker *w;
	struct slot *s;
	enum sess_state state;
	struct al_sandbox *sb;
	struct event *watch[AL_WATCH_MAX];
	int nwatch;
	int listen_fd;
	struct event *listen_ev;
	struct bufferevent *chan;
	struct event *timer;	 /* hello, idle, the call's time, then its interrupt */
	struct event *life;	 /* the session's maximum life */
	struct event *cpu_poll;	 /* the active call's CPU, looked at */
	struct wk_proxy *egress; /* network egress: its proxy, for all its calls */
	uint64_t cpu_base_ns;	 /* the sandbox's CPU when the call began */
	uint64_t call_cpu_ms;	 /* the active call's CPU time */
	bool cpu_over;		 /* ...which it used up (the host saw it): interrupted */
	bool cancelled;		 /* ...or a client cancelled it: interrupted */
	/* the ids of the calls taken (a ring): a call sent again with the id of
	 * one of them (a client's retry after a fault) runs no second time */
	char (*seen)[AL_ID_MAX + 1];
	unsigned nseen, seen_at;
	struct pending *queue;	/* calls waiting, in order */
	struct pending *active; /* the call the server runs */
	bool interrupted;	/* the active call passed its time */
	bool live;		/* ...its output goes to al:out:<call id> */
	bool out_ttl_set;	/* ...whose TTL is set (at its first chunk) */
	uint64_t live_sent[2];	/* ...bytes of stdout, stderr streamed */
	bool chan_gone;		/* the server closed its end: the sandbox ends */
	/* the interpreter was killed (the session's memory: the OOM killer),
	 * its supervisor starts another, which connects anew (process,
	 * container: the listener stays for it) */
	bool restarting;
	uint64_t oom_base; /* the sandbox's OOM kills when the call began */
	uint64_t call_t0;
	uint64_t opened_ms;
	uint64_t opened_mono, idle_since_mono; /* its life's and its idleness's start */
	uint64_t trimmed_mono;		       /* its sandbox last trimmed (0: never) */
	uint64_t idle_ms, life_ms; /* its idle time, its life (the tier's; extend moves them) */
	uint64_t cpu_budget_ms;	   /* the CPU of all its calls, at most (0: none) */
	unsigned calls;
	/* ended while SESSION_OPEN was in flight: its answer finishes it */
	bool open_in_flight;
	char id[AL_ID_MAX + 1]; /* the session's (its open job's) */
	enum al_sess_end why;
	char end_msg[AL_ERR_MSG_MAX];
	/* sessions.c's end_session: how a call ends the session (a broken
	 * server, a call that will not stop) without calling up into it */
	void (*end)(struct wk_session *ss, enum al_sess_end why, const char *detail);
	/* session_pause.c's wk_sess_pause: the active call is a pause or a
	 * fork (NULL on a backend that cannot: answered unsupported) */
	void (*pause)(struct wk_session *ss);
	bool restored;	      /* started from a snapshot: no open job to answer */
	bool paused;	      /* recorded paused: its end writes no end, its queue goes back */
	bool pause_in_flight; /* ...being recorded: the session is not freed under it */
	bool pause_checked;   /* ...its tenant's paused count looked at (runsc) */
	struct wk_pausing *pausing; /* the pause's snapshot and copies, until recorded */
	uint64_t resumed_ms;	    /* a restore's time (its info says) */
	char *restored_from;	    /* ...its snapshot, removed once the record says open */
	uint64_t resume_t0_ms;	    /* ...whose restore began then (monotonic) */
};

/* What a restore starts a session's sandbox with (sessions.c's
 * wk_session_start): the snapshot's checked copy, and what the session had
 * left when it paused. */
struct wk_restore {
	int fd;
	char path[4096]; /* the snapshot file, removed once the session is open */
	uint64_t life_left_ms, idle_ms, cpu_budget_ms, calls, t0_ms;
	const char *seen; /* its last calls' ids (wk_sess_seen_text's), or NULL */
};
/* sessions.c's session start, handed to session_pause.c's resume */
typedef void (*wk_session_start_fn)(struct worker *w, struct slot *s, const struct wk_restore *rs);

/* session_pause.c */
/* The active call (ss->active: pause, fork; NULL: the session idled on a
 * tier that pauses idle sessions) runs: the sandbox saved, the record says
 * paused (or the copies exist), the call answered; a paused session's end
 * follows (ss->paused, ss->end). */
void wk_sess_pause(struct wk_session *ss);
/* Whether ss's sandbox can be paused (its backend and tier can save it);
 * and whether a tier's sessions can (its resume queue is served). */
bool wk_sess_pausable(const struct wk_session *ss);
bool wk_tier_pauses(const struct al_tier_policy *t, const struct al_backend_ops *ops);
/* A paused session's id taken from a resume queue (rq): made this worker's
 * and restored into a free slot of its tier through start, or ended with
 * its reason (a close held for it, a snapshot refused), its calls
 * answered. */
void wk_sess_resume(struct worker *w, const char *rq, const char *sid, wk_session_start_fn start);
/* A restore that did not come up (before it was open again): its record
 * ends for why, the calls held for it are answered with msg. */
void wk_sess_resume_failed(struct worker *w, const char *sid, enum al_sess_end why,
			   const char *msg);
/* The rq a tier's paused sessions wait on (al:rq:<tier> with a
 * snapshot_dir: any of its workers resumes them; else al:rq:@<worker>). */
const char *wk_sess_rq_of(struct worker *w, const struct al_tier_policy *t, char out[AL_KEY_MAX]);
/* sid onto its resume queue's head, for a worker with room (a resume
 * taken meanwhile; a runsc fork's parent, back at once). */
void wk_sess_requeue(struct worker *w, const char *rq, const char *sid);
/* The resume queues this worker serves (all, or only those with a free
 * slot of their tier's backend): their keys in keys[0..], count. */
size_t wk_sess_resume_queues(struct worker *w, bool free_only, char (*keys)[AL_KEY_MAX],
			     size_t cap);
/* Each heartbeat: paused sessions past their tier's paused_max_s end
 * (paused_expired) with their snapshots; the first time, half-written
 * snapshots of an earlier run are removed, and then every few minutes the
 * snapshots of sessions that ended while their worker was away. */
void wk_sess_paused_tick(struct worker *w);

/* session_calls.c */
/* ss's memory, once nothing refers to it (a session ended; no Redis reply
 * is still to come for it). */
void wk_sess_free(struct wk_session *ss);
/* The session's network egress proxy closed, its listener and every
 * connection (before a runsc checkpoint, and when the session ends). */
void wk_sess_egress_end(struct wk_session *ss);
/* A call's answer: ok, with text (JSON) as its stdout. */
void wk_sess_reply_text(struct wk_session *ss, const struct al_sess_call *c, const char *text);
/* A call's answer (a result, or just a status and why) onto its keys. */
void wk_sess_reply(struct worker *w, const char *sid, const char *call_id, struct al_result *res);
void wk_sess_reply_status(struct worker *w, const char *sid, const char *call_id,
			  enum al_status_code st, const char *msg);
void wk_sess_pending_free(struct pending *p);
/* A frame (doc, taken) to the session's server; nonzero when it cannot go. */
int wk_sess_send(struct wk_session *ss, json_t *doc);
/* The largest frame the server may send for the active call. */
size_t wk_sess_frame_max(const struct wk_session *ss);
void wk_sess_arm(struct event *ev, uint64_t ms);
/* The idle timer, from now. */
void wk_sess_arm_idle(struct wk_session *ss);
/* The next queued call to the server, if none runs. */
void wk_sess_next(struct wk_session *ss);
/* The active call stops (why: time, cpu, cancel); the session goes on if
 * it does within INTERRUPT_MS. */
void wk_sess_interrupt(struct wk_session *ss, const char *why);
/* The cpu_poll timer's callback (arg: the session). */
void wk_sess_on_cpu_poll(evutil_socket_t fd, short what, void *arg);
/* The server's answer to the active call, and a live output chunk. */
void wk_sess_answer(struct wk_session *ss, json_t *doc);
void wk_sess_chunk(struct wk_session *ss, json_t *doc);
/* info, extend and cancel calls (p, taken), answered at once. */
void wk_sess_info(struct wk_session *ss, struct pending *p);
void wk_sess_extend(struct wk_session *ss, struct pending *p);
void wk_sess_cancel(struct wk_session *ss, struct pending *p);
/* The interpreter came back after it was killed (its supervisor's new
 * one said hello, said: its "restarted"): the active call, if any,
 * answers memory_limit (the sandbox's OOM kills went up; where the backend
 * counts none, a microVM's, the server said "memory") or signal 9, its
 * state gone; the session goes on. */
void wk_sess_restarted(struct wk_session *ss, const char *said);
/* True the first time the session takes a call of this id (within its
 * last SEEN_CALLS); then remembered. */
bool wk_sess_seen_first(struct wk_session *ss, const char *id);
/* Those ids, oldest first, each ended by '\n' (malloc'd; "" when none;
 * NULL out of memory): what a paused session's record keeps ("seen"). */
char *wk_sess_seen_text(const struct wk_session *ss);
/* The ids of such a text remembered (a resumed session's), in order. */
void wk_sess_seen_load(struct wk_session *ss, const char *text);

#endif
