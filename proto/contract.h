/* contract.h - the Redis contract in one place: key names built by
 * functions, one typed argument builder per script, and every script's
 * answers by name. No I/O: a builder fills a struct al_call, which the
 * caller hands to Redis as one argv (al_call_argv). PROTOCOL.md ("Redis")
 * documents the same for clients in other languages. */
#ifndef AL_CONTRACT_H
#define AL_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h" /* struct al_bytes, al_kv */
#include "keys.h"
#include "scripts.h"

/* ---- key names ----
 * Each writes the key into out (AL_KEY_MAX bytes) and returns out. Ids,
 * tenants and tiers are restricted to safe characters by the codec; a name
 * that would not fit is cut (it then names no key Airlock uses). */
const char *al_key_job(char out[AL_KEY_MAX], const char *id); /* al:job:<id> */
const char *al_key_res(char out[AL_KEY_MAX], const char *id); /* al:res:<id> */
const char *al_key_out(char out[AL_KEY_MAX], const char *id); /* al:out:<id>: live output */
const char *al_key_sub(char out[AL_KEY_MAX], const char *id); /* al:sub:<id>: a submission */
/* al:reply:<nonce>: the scheduler's answer to one cancel request */
const char *al_key_reply(char out[AL_KEY_MAX], const char *nonce);
const char *al_key_queue(char out[AL_KEY_MAX], const char *tier, int band); /* al:q:<tier>:<band> */
const char *al_key_tenant(char out[AL_KEY_MAX], const char *tenant);	    /* al:tenant:<t> */
/* al:idem:<tenant>/<key> */
const char *al_key_idem(char out[AL_KEY_MAX], const char *tenant, const char *key);
/* al:idem:<tenant>#/<key>: the gateway's digest of the key's first body */
const char *al_key_idem_digest(char out[AL_KEY_MAX], const char *tenant, const char *key);
const char *al_key_worker(char out[AL_KEY_MAX], const char *worker); /* al:worker:<id> */
const char *al_key_hist(char out[AL_KEY_MAX], const char *tier, const char *backend);
const char *al_key_vm(char out[AL_KEY_MAX], const char *name);	 /* al:vm:<name> */
const char *al_key_sess(char out[AL_KEY_MAX], const char *id);	 /* al:sess:<id> */
const char *al_key_wq(char out[AL_KEY_MAX], const char *worker); /* al:wq:<worker> */
const char *al_key_sq(char out[AL_KEY_MAX], const char *id);	 /* al:sq:<id>: held calls */
/* A session's call is answered under "<session>/<call>" (al:res:<it>,
 * al:out:<it>): no job's id holds a '/', so no call's answer can land on a
 * job's keys, and each session's calls live under its own prefix. */
#define AL_CALL_KEY_MAX 130 /* two ids (job.h, AL_ID_MAX), a slash, a NUL */
const char *al_call_key_name(char out[AL_CALL_KEY_MAX], const char *session, const char *call);
/* The tier of a ready stream's name (al:q:<tier>:<band>) into tier (cap
 * bytes); false when name is not one. */
bool al_key_queue_tier(const char *name, char *tier, size_t cap);

/* ---- where a job is in its life: the state field of al:job:<id> ----
 * Three vocabularies, three names: a job's state (here, written by the
 * scripts), a result's status (result.h: how an attempt ended) and an
 * error code (err.h: why a call failed). */
enum al_job_state {
	AL_JS_SUBMITTED = 0, /* in the intake, not yet admitted (only its marker, al:sub:<id>) */
	AL_JS_QUEUED,	     /* admitted, in its tier's ready stream */
	AL_JS_RUNNING,	     /* claimed by a worker under a lease */
	AL_JS_RETRYING,	     /* its attempt failed; back in the queue after a delay */
	AL_JS_DONE,	     /* its result is committed */
	AL_JS_COUNT
};
const char *al_job_state_name(enum al_job_state s);
/* The state for a name, or AL_EINVAL. */
int al_job_state_parse(const char *name);

/* ---- a command under construction ----
 * Every argument is copied, so a call owns what it sends and can be sent
 * again (after a reconnect) without its builder's buffers. */
struct al_strv {
	char **v;
	size_t *len;
	int n, cap;
};

struct al_call {
	const char *script;	   /* one of al_lua_*: EVALSHA; NULL: a plain command */
	struct al_strv keys, args; /* a script's KEYS and ARGV; a command's words in args */
	bool oom;		   /* an append failed: the call must not be sent */
	/* filled by al_call_argv */
	const char **argv;
	size_t *lens;
	char nkeys[16];
};

/* script NULL: a plain command (add its words with al_call_arg*). */
void al_call_init(struct al_call *c, const char *script);
void al_call_key(struct al_call *c, const char *key);
void al_call_arg(struct al_call *c, const void *data, size_t len);
void al_call_str(struct al_call *c, const char *s); /* NULL counts as "" */
void al_call_u64(struct al_call *c, uint64_t v);
void al_call_i64(struct al_call *c, int64_t v);
/* The whole command (EVALSHA sha nkeys KEYS... ARGV..., or the words) in
 * *argv / *lens, valid until the call is freed or changed. AL_ENOMEM when an
 * append ran out of memory (then nothing may be sent). */
int al_call_argv(struct al_call *c, int *argc, const char ***argv, const size_t **lens);
/* Number of items a batch call holds (keys per item given). */
int al_call_items(const struct al_call *c, int keys_per_item);
/* Move src into dst (src is left empty). */
void al_call_move(struct al_call *dst, struct al_call *src);
void al_call_free(struct al_call *c); /* NULL and empty calls are fine */

/* ---- the scripts' answers ---- */
enum al_submit_code {
	AL_SUBMIT_ACCEPTED = 1,
	AL_SUBMIT_SAME_KEY = 0, /* an earlier job has this idempotency key: its id comes back */
	AL_SUBMIT_ID_TAKEN = -1,
};
enum al_admit_code {
	AL_ADMIT_QUEUED = 1,
	AL_ADMIT_AGAIN = 0,	  /* admitted before (a repeated ADMIT): nothing changed */
	AL_ADMIT_FINISHED = -1,	  /* ended before admission (cancelled): its result exists */
	AL_ADMIT_ID_TAKEN = -2,	  /* another submission has this id: never run, dead-lettered */
	AL_ADMIT_QUEUE_FULL = -3, /* tenant's max_queued reached: commit rejected */
	AL_ADMIT_RATE = -4,	  /* tenant's rate_per_s exceeded: commit rejected */
};
enum al_claim_code {
	AL_CLAIM_RUN = 1,
	AL_CLAIM_STALE = 0,	   /* another attempt or finished: acknowledge */
	AL_CLAIM_UNKNOWN = -2,	   /* no record */
	AL_CLAIM_CANCELLED = -3,   /* commit cancelled */
	AL_CLAIM_EXPIRED = -4,	   /* past its deadline: commit expired */
	AL_CLAIM_TENANT_FULL = -5, /* tenant at max_running: retry soon */
	AL_CLAIM_MALFORMED = -9,   /* FETCH: the entry lacks id or attempt */
};
enum al_commit_code { /* COMMIT's and REJECT's */
		      AL_COMMIT_DONE = 1,
		      AL_COMMIT_EXISTS = 0, /* a result was committed before: this one is dropped */
		      AL_COMMIT_STALE =
			  -1, /* another attempt owns the job (REJECT: it was admitted) */
		      AL_COMMIT_ID_TAKEN =
			  -2, /* REJECT: the entry's id belongs to another submission */
};
enum al_retry_code { AL_RETRY_SCHEDULED = 1, AL_RETRY_STALE = -1 };
enum al_reclaim_code {
	AL_RECLAIM_REQUEUED = 1,
	AL_RECLAIM_STALE = 0,	  /* finished or another attempt: acknowledged */
	AL_RECLAIM_EXHAUSTED = 2, /* attempts used up: commit worker_lost */
	AL_RECLAIM_UNKNOWN = -2,
};
enum al_cancel_code {
	AL_CANCEL_ENDED = 1,	 /* was waiting: its cancelled result is committed */
	AL_CANCEL_KILL_SENT = 2, /* running: its worker stops it and commits */
	AL_CANCEL_FINISHED = 0,
	AL_CANCEL_UNKNOWN = -1,
	/* a client's only, never the script's: the request is on the intake,
	 * but no scheduler answered within AL_CANCEL_WAIT_S; one carries it
	 * out when it reads the intake */
	AL_CANCEL_REQUESTED = 3,
};

/* ---- one typed builder per script ---- */
struct al_submit_item {
	const char *id, *tier, *tenant;
	const char *job; /* the msgpack job */
	size_t joblen;
	uint64_t now_ms;
	const char *idem_key; /* NULL: none */
	uint64_t idem_ttl_s;
};
/* c was made with al_call_init(c, al_lua_submit); one call per batch. */
void al_submit_add(struct al_call *c, const struct al_submit_item *it);
/* LOOKUP of one job: {state, tenant} (sent as EVALSHA_RO). */
void al_lookup_call(struct al_call *c, const char *id);

struct al_admit_item {
	const char *id, *tier, *tenant, *entry;
	const char *job; /* msgpack, the tier's defaults filled */
	size_t joblen;
	unsigned priority, max_attempts;
	uint64_t now_ms, deadline_ms;
	uint64_t max_queued, rate_per_s, max_running; /* the tenant's caps, 0 = none */
};
void al_admit_init(struct al_call *c);
void al_admit_add(struct al_call *c, const struct al_admit_item *it);

void al_claim_init(struct al_call *c, const char *worker, uint64_t now_ms);
void al_claim_add(struct al_call *c, const char *id, unsigned attempt);
void al_fetch_call(struct al_call *c, const char *const *streams, int nstreams, const char *worker,
		   uint64_t now_ms, unsigned count);

struct al_commit_item {
	const char *id;
	long attempt;	    /* 1 or more: the attempt that ran (see REJECT for unrun) */
	const char *result; /* msgpack result */
	size_t len;
	uint64_t ttl_ms;
	const char *stream, *entry, *group; /* the entry to acknowledge, or NULL */
	const char *status;		    /* al_status_name() */
};
/* c was made with al_call_init(c, al_lua_commit) (or al_lua_commit_fetch);
 * one call per batch, AL_COMMIT_KEYS keys an item. */
#define AL_COMMIT_KEYS 4
void al_commit_add(struct al_call *c, const struct al_commit_item *it);
/* COMMIT_FETCH: after the batch's nresults items, the fetch for worker. */
void al_commit_fetch_end(struct al_call *c, int nresults, const char *const *streams, int nstreams,
			 const char *worker, uint64_t now_ms, unsigned count);

struct al_retry_item {
	const char *id, *stream, *entry, *group;
	unsigned attempt;
	uint64_t due_ms;
	bool bump; /* count an attempt (sandbox_error) or not (given back) */
};
void al_retry_call(struct al_call *c, const struct al_retry_item *it);
void al_promote_call(struct al_call *c, uint64_t now_ms, unsigned max);
void al_reclaim_call(struct al_call *c, const char *id, const char *stream, const char *entry,
		     const char *group, const char *attempt);
/* REJECT: the result of the intake entry `entry` that never reached a queue. */
void al_reject_call(struct al_call *c, const char *id, const char *result, size_t len,
		    uint64_t ttl_ms, const char *entry, const char *status);

/* Cancelling goes through the scheduler: a client appends a request to the
 * intake (al_cancel_request_call: XADD al:intake * cancel <id> reply
 * <nonce>) and waits for the answer on al:reply:<nonce>
 * (al_reply_wait_call: BLPOP); the scheduler runs CANCEL (al_cancel_call)
 * for the request's entry, which pushes the answer there (kept
 * AL_REPLY_TTL_MS). A nonce is like a job id (al_job_id_ok). */
#define AL_REPLY_TTL_MS	 60000
#define AL_CANCEL_WAIT_S 10 /* how long a client waits for the answer */
void al_cancel_request_call(struct al_call *c, const char *id, const char *nonce);
void al_reply_wait_call(struct al_call *c, const char *nonce, unsigned timeout_ms);
void al_cancel_call(struct al_call *c, const char *id, const char *result, size_t len,
		    uint64_t ttl_ms, const char *entry, const char *nonce);
void al_expire_call(struct al_call *c, const char *id, const char *result, size_t len,
		    uint64_t ttl_ms);
void al_trim_call(struct al_call *c, const char *stream, const char *group);
/* A stream entry id ("<ms>-<seq>", two 64-bit numbers) with its NUL. */
#define AL_STREAM_ID_MAX 48
/* Waiting for a result: AWAIT (read only) gives it, or the id of the live
 * output's newest entry; then XREAD COUNT 1 BLOCK timeout_ms STREAMS
 * al:out:<id> <that id> wakes when anything comes after it (the result's
 * end entry, or a chunk), and AWAIT again. */
void al_await_call(struct al_call *c, const char *id);
void al_end_wait_call(struct al_call *c, const char *id, const char *after, unsigned timeout_ms);
void al_give_back_call(struct al_call *c, const char *stream, const char *group, const char *entry);

/* Dead letters: XADD al:dlq MAXLEN max_len * reason R source S entry E
 * id I size N raw <the first AL_DLQ_RAW_MAX bytes>. raw may be NULL. */
#define AL_DLQ_RAW_MAX	       4096
#define AL_DLQ_REASON_MAX      1024
#define AL_DLQ_MAX_LEN_DEFAULT 10000
void al_dlq_call(struct al_call *c, uint64_t max_len, const char *reason, const char *source,
		 const char *entry, const char *id, const char *raw, size_t rawlen);

void al_workers_call(struct al_call *c, const char *policy_hash);
void al_vm_end_due_call(struct al_call *c, uint64_t now_ms, uint64_t ttl_ms);
void al_vm_end_one_call(struct al_call *c, const char *name, const char *reason, uint64_t now_ms,
			uint64_t ttl_ms);

/* Plain commands the daemons send by name. */
void al_xack_call(struct al_call *c, const char *stream, const char *group, const char *entry);
/* XGROUP CREATE stream group 0 MKSTREAM (an existing group: BUSYGROUP, harmless). */
void al_xgroup_create_call(struct al_call *c, const char *stream, const char *group);
/* WAIT replicas timeout_ms: how many replicas have every write so far. */
void al_wait_call(struct al_call *c, unsigned replicas, unsigned timeout_ms);
/* The workers' registry: al:worker:<id> set with a TTL of ttl_ms each beat
 * (SET .. PX), its description in al:workers (HSET); both gone at exit. */
void al_worker_alive_call(struct al_call *c, const char *worker, uint64_t ttl_ms);
void al_worker_register_call(struct al_call *c, const char *worker, const char *desc);
void al_worker_alive_end_call(struct al_call *c, const char *worker);
/* A scheduler's sign of life: al:scheduler:<id> holds its policy's hash
 * for ttl_ms (SET .. PX); SADD al:schedulers names it for readers. */
const char *al_key_scheduler(char out[AL_KEY_MAX], const char *sched);
void al_scheduler_alive_call(struct al_call *c, const char *sched, const char *policy_hash,
			     uint64_t ttl_ms);
void al_worker_unregister_call(struct al_call *c, const char *worker);
/* A registry set (al:hists, al:tiers): SADD one member; SMEMBERS. */
void al_registry_add_call(struct al_call *c, const char *set, const char *member);
void al_registry_call(struct al_call *c, const char *set);
/* HGETALL of a hash the daemons read whole (al:workers, al:stats, a
 * histogram). */
void al_hash_all_call(struct al_call *c, const char *key);
/* GET al:res:<id>: a result, NUL when there is none (yet). */
void al_result_get_call(struct al_call *c, const char *id);
/* XLEN al:dlq: how many dead letters; ZCARD al:delayed: retries waiting. */
void al_dlq_len_call(struct al_call *c);
void al_retries_waiting_call(struct al_call *c);
/* A service VM's lease record (al:vm:<name>, HSET of n field/value pairs
 * kv[0..2n-1]) and its place in the al:vm:leases index (ZADD at exp). */
void al_vm_record_call(struct al_call *c, const char *name, const char *const *kv, size_t n);
void al_vm_index_call(struct al_call *c, const char *name, const char *expires_ms);
/* Live output (PROTOCOL.md, "Live output"): one entry of al:out:<id>, t
 * type (out, err, restart) for attempt, with data d when not NULL; the
 * stream's TTL, set with its first entry. */
void al_out_entry_call(struct al_call *c, const char *id, unsigned attempt, const char *type,
		       const void *data, size_t len);
void al_out_ttl_call(struct al_call *c, const char *id, uint64_t ttl_ms);

/* Sessions (scripts.h, SESSION_*). */
/* SESSION_OPEN: the record, its lease and life from now on Redis's clock
 * (TIME, in the script: no host's clock decides a session's life). */
struct al_session_open_item {
	const char *id, *tenant, *tier, *worker;
	uint64_t lease_ms, life_ms; /* durations */
	uint32_t max_per_tenant;
};
void al_session_open_call(struct al_call *c, const struct al_session_open_item *it);
/* SESSION_CALL's answers (AL_SESS_Q_PAUSED_INFO: an info call to a
 * paused session, answered by its record: {4, JSON}) */
enum {
	AL_SESS_Q_UNKNOWN = 0,
	AL_SESS_Q_QUEUED = 1,
	AL_SESS_Q_ENDED = 2,
	AL_SESS_Q_MISMATCH = 3,
	AL_SESS_Q_PAUSED_INFO = 4
};
void al_session_queue_call(struct al_call *c, const char *id, const char *tenant, const void *call,
			   size_t len);
/* SESSION_REPLY for call call_id of session (al_call_key_name). */
void al_session_reply_call(struct al_call *c, const char *session, const char *call_id,
			   const void *result, size_t len, const char *status, uint64_t ttl_ms);
/* SESSION_RENEW: the worker's open sessions ids[0..n-1] leased for
 * lease_ms more on Redis's clock; the answer is an array of those it did
 * not renew (ended, by the scheduler or a client, or not the worker's). */
void al_session_renew_call(struct al_call *c, const char *worker, uint64_t lease_ms,
			   const char *const *ids, size_t n);
void al_session_end_call(struct al_call *c, const char *id, const char *reason, uint64_t now_ms,
			 uint64_t ttl_ms);
void al_session_lost_call(struct al_call *c, uint64_t now_ms, uint64_t ttl_ms);
/* HMGET al:sess:<id> tenant state reason worker lease_ms: a caller's look
 * while it waits for a call's result. */
void al_session_read_call(struct al_call *c, const char *id);
/* What that look says (state, reason: the answer's texts, NULL when
 * absent): NULL while the session is open; else why no answer will come:
 * its reason ("ended" when it has none). A session whose worker stopped
 * renewing its lease is ended (worker_lost) by the scheduler, which alone
 * judges leases, on Redis's clock: no caller's clock decides it. */
const char *al_session_end_seen(const char *state, const char *reason);
/* BLPOP al:wq:<worker> (then the resume queues rqs[0..nrq-1], whose
 * paused sessions it would take) timeout_ms: the worker's wait for its
 * calls. */
void al_session_calls_wait_call(struct al_call *c, const char *worker, const char *const *rqs,
				size_t nrq, unsigned timeout_ms);

/* Paused sessions (scripts.h SESSION_PAUSE ... PAUSED_DUE; docs/snapshots.md).
 * A resume queue: al:rq:<tier> for a tier whose snapshots all its workers
 * reach (snapshot_dir), al:rq:@<worker> for one whose stay on the worker. */
const char *al_key_rq(char out[AL_KEY_MAX], const char *tier, const char *worker);
struct al_rec_field {
	const char *name, *value;
};
struct al_session_pause_item {
	const char *id, *tenant, *worker, *rq;
	uint32_t max_paused;		   /* the tenant's paused sessions, at most */
	uint64_t paused_max_ms;		   /* kept paused this long, then ended with its snapshot */
	const struct al_rec_field *fields; /* the record's: snapshot, its size, digest... */
	size_t nfields;
	struct al_bytes job;	     /* ...and the open job (msgpack) */
	const struct al_bytes *held; /* calls queued behind the pause: they resume it at once */
	size_t nheld;
};
/* SESSION_PAUSE -> {1, paused} paused; {0, paused} the tenant is at its
 * maximum (nothing written); {-1, 0} not open on this worker */
void al_session_pause_call(struct al_call *c, const struct al_session_pause_item *it);
/* SESSION_FORK: n paused sessions ids[i] (snapshot paths[i]) from it's
 * open one -> as SESSION_PAUSE, {-2, 0} an id taken */
void al_session_fork_call(struct al_call *c, const struct al_session_pause_item *it,
			  const char *const *ids, const char *const *paths, size_t n);
/* SESSION_TAKE: a resuming session is this worker's -> {0} not resuming;
 * {1, the record's fields and values, the calls held for it} */
void al_session_take_call(struct al_call *c, const char *id, const char *worker, uint64_t lease_ms);
/* SESSION_RESUMED: open again here, its held calls onto al:wq:<worker> ->
 * {1, open sessions} or {0, 0} */
void al_session_resumed_call(struct al_call *c, const char *id, const char *tenant,
			     const char *worker);
/* SESSION_DROP: a paused (or resuming) session ended for reason, the
 * first `answered` of its held calls answered already (before the record
 * says ended: a client that sees ended finds their answers) ->
 * {1, snapshot path, the calls held after those...} or {0, ""} */
void al_session_drop_call(struct al_call *c, const char *id, const char *reason, uint64_t ttl_ms,
			  size_t answered);
/* PAUSED_DUE: the paused sessions of the queues rqs past their time, ended
 * (paused_expired) -> the sessions waiting on rqs to resume (their
 * lengths added up), then sid, snapshot path, sid, path... */
void al_paused_due_call(struct al_call *c, uint64_t ttl_ms, const char *const *rqs, size_t nrq);
/* A worker looks for the paused sessions past their time this often; the
 * scheduler ends those still paused two leases and that long after it. */
#define AL_PAUSED_DUE_EVERY_MS 2000
/* PAUSED_EXPIRE: the paused sessions past their time by more than grace_ms
 * (no worker that serves their resume queue ended them: it is gone),
 * ended paused_expired -> how many (64 at most a call) */
void al_paused_expire_call(struct al_call *c, uint64_t grace_ms, uint64_t ttl_ms);

#endif
