/* scripts.h - the Lua scripts that make every queue transition atomic in
 * Redis. Text only (no I/O); PROTOCOL.md lists each script's keys and
 * arguments, so a client in another language can use them too. */
#ifndef AL_SCRIPTS_H
#define AL_SCRIPTS_H

#include <stdbool.h>

/* Each script's keys, arguments and answers. The typed builders in
 * contract.h fill them; PROTOCOL.md ("Scripts") says the same for clients in
 * other languages. A script that moves a tenant's counters takes the tenant
 * from the job's record (al:job:<id> field tenant), never from its caller. */

/* SUBMIT  (batch) per job, 2 KEYS: the submission's marker (al:sub:<id>),
 *         idempotency key; and 7 ARGV: id, job bytes, now ms, idempotency
 *         ttl s (also the marker's), has idempotency key (0/1), tier, tenant
 * Appends the job to the intake and writes the marker, a string "<intake
 * entry> <tenant> <tier>" (now ms is not kept); the job record is the
 * scheduler's to make. A client may
 * write nothing else: it needs no right on records, results or counters.
 * -> per job: {1, id} accepted; {0, earlier id} same idempotency key;
 *    {-1, id} the id is taken (a marker or a record exists) */
extern const char al_lua_submit[];

/* LOOKUP  (read only: EVALSHA_RO) KEYS: job hash, submission marker
 * -> {state, tenant}: the record's, else {"submitted", the marker's
 *    tenant} while the job waits for admission, else {nil, nil} */
extern const char al_lua_lookup[];

/* ADMIT   (batch) KEYS: intake, then per job: job hash, submission marker,
 *         ready stream
 *         ARGV: intake group, then per job 12 values: id, job bytes
 *         (defaults filled), tier, tenant, max attempts, now ms, deadline ms,
 *         max queued (0 = none), rate per s (0 = none), band (hi/mid/lo),
 *         tenant's max running (0 = none), intake entry id
 * -> one code per job (enum al_admit_code). Idempotent: an entry admitted
 *    before answers 0 and changes nothing. The intake entry is acknowledged
 *    except on -3/-4, where the caller commits the rejection together with
 *    the entry. Tenant queued/running counters are kept only for jobs of
 *    tenants with a cap ("counted"). */
extern const char al_lua_admit[];

/* CLAIM   (batch) KEYS: one job hash per job   ARGV: worker, now ms, then
 *         one attempt per job
 * -> per job: {code, job bytes for 1, -3, -4} (enum al_claim_code) */
extern const char al_lua_claim[];

/* FETCH   KEYS: the worker's ready streams, high band first
 *         ARGV: worker, now ms, count
 * Reads up to count new entries in all (XREADGROUP without blocking, one
 * stream after another in the order given, each for what is left of count)
 * and claims each like CLAIM, in one round trip. -> per entry: {stream, entry id, job
 * id, attempt, code, job} with CLAIM's codes, or AL_CLAIM_MALFORMED.
 * Empty when nothing waits: the worker then blocks in XREADGROUP. */
extern const char al_lua_fetch[];

/* COMMIT  (batch) per result, 4 KEYS: job hash, result, stream the entry
 *         is in, live output (its end entry is the waiters' signal); and 6 ARGV: attempt, result
 * bytes, ttl ms, entry id (or ""), group, status
 * -> per result (enum al_commit_code) */
extern const char al_lua_commit[];

/* COMMIT_FETCH  COMMIT's batch and a FETCH in one call (the worker's: the
 *         slots the batch freed take their next jobs in the same round trip)
 *         KEYS: COMMIT's 4 per result, then the worker's ready streams,
 *         high band first   ARGV: COMMIT's 6 per result, then worker, now
 *         ms, count, number of results
 * The results are committed (and their entries acknowledged) before the
 * read. -> {COMMIT's answers, FETCH's answer} */
extern const char al_lua_commit_fetch[];

/* REJECT  KEYS: job hash, result, live output, submission marker,
 *         intake   ARGV: id, result bytes, ttl ms, intake entry id,
 *         group, status
 * The result of a submission that never reached a queue; allowed only
 * while the job has no record, and only for the intake entry that holds
 * the id (the marker's or record's entry). The entry is acknowledged.
 * -> enum al_commit_code (1 committed, 0 a result exists, -1 admitted
 *    already, -2 another submission has the id) */
extern const char al_lua_reject[];

/* RETRY   KEYS: job hash, delayed zset, ready stream
 *         ARGV: attempt, due ms, entry id, group, id, bump (1 = next attempt)
 * -> enum al_retry_code */
extern const char al_lua_retry[];

/* PROMOTE KEYS: delayed zset   ARGV: now ms, max count
 * Moves due retries to their tier's ready stream. -> number moved */
extern const char al_lua_promote[];

/* RECLAIM KEYS: job hash, result, ready stream
 *         ARGV: entry id, group, entry attempt, id
 * -> enum al_reclaim_code */
extern const char al_lua_reclaim[];

/* CANCEL  (the scheduler's, for a cancel request on the intake)
 *         KEYS: job hash, result, live output, submission marker, intake,
 *         reply list
 *         ARGV: id, cancelled result bytes, ttl ms, group, request's entry
 *         id, reply ttl ms
 * -> enum al_cancel_code, also pushed to the reply list; the request is
 *    acknowledged */
extern const char al_lua_cancel[];

/* EXPIRE  KEYS: job hash, result, live output, deadlines zset
 *         ARGV: id, expired result bytes, ttl ms
 * -> 1 expired while waiting; 0 running, finished or unknown */
extern const char al_lua_expire[];

/* TRIM    KEYS: stream   ARGV: group
 * Acknowledged entries are not deleted one by one (XDEL is costly): this
 * trims every entry before the group's first pending entry, or up to its
 * last delivered one. -> {trimmed, lag (waiting, -1 unknown), pending} */
extern const char al_lua_trim[];

/* AWAIT   (read only) KEYS: result, live output
 * -> {1, result bytes}; or {0, the live output's newest entry id, "0-0"
 *    when it has none}: XREAD after that id wakes when the result's end
 *    entry comes (every script that writes a result appends it). */
extern const char al_lua_await[];

/* GIVE_BACK KEYS: ready stream   ARGV: group, entry id
 * A delivered, unclaimed entry goes back to the end of its stream (re-added
 * and acknowledged together). -> XACK's count */
extern const char al_lua_give_back[];

/* WORKERS (read only) KEYS: al:workers   ARGV: the caller's policy hash
 * -> {live workers, busy slots, slots, held jobs, paused backends, workers
 *    whose policy differs from the caller's}: the workers whose
 *    al:worker:<id> exists (the scheduler's metrics) */
extern const char al_lua_workers[];

/* VM_END_DUE KEYS: al:vm:leases   ARGV: now ms, ttl ms
 * Ends the leases due by now (at most 32 a call): each lease record
 * (al:vm:<name>) says ended and why, and expires after ttl.
 * -> the names ended (their domains are the caller's to destroy) */
extern const char al_lua_vm_end_due[];

/* VM_END_ONE KEYS: al:vm:leases   ARGV: name, reason, now ms, ttl ms
 * Ends one lease (its domain is gone). -> 1 */
extern const char al_lua_vm_end_one[];

/* Sessions (call.h; PROTOCOL.md, "Sessions"). A session's record is
 * al:sess:<id> (tenant, tier, worker, state open|ended, reason, opened_ms,
 * lease_ms, life_ms, ended_ms); al:sessions orders the open ones by lease
 * end; al:tenant:<t> field sessions counts a tenant's open ones.
 *
 * SESSION_OPEN (worker) KEYS: record, al:tenant:<t>, al:sessions
 *         ARGV: tenant, tier, worker, 0 (unused), lease ms, max per tenant,
 *         life ms, session id
 * The record's opened_ms, lease_ms and life_ms are Redis's TIME (plus the
 * durations): no host's clock.
 * -> {1, open sessions} opened; {0, open sessions} the tenant is at its
 *    maximum (nothing written) */
extern const char al_lua_session_open[];

/* SESSION_CALL (client) KEYS: none   ARGV: session id, tenant, call bytes
 * Queues the call for the worker that holds the session (al:wq:<worker>),
 * once the call map's own session and tenant ("default" when absent) are
 * the arguments and its id is an id (Redis's cmsgpack knows no bin type,
 * so the map is walked in Lua). The record (al:sess:<id>) is named inside,
 * not declared: a client may only read it, and Redis wants declared keys
 * readable and writable. The worker checks all of it again: a raw RPUSH
 * onto al:wq:<worker> needs no script.
 * -> {1} queued; {0} no such session for this tenant (another tenant's
 *    reads the same); {2, reason} the session has ended; {3, why} the call
 *    does not match its arguments or is not a map (nothing queued) */
extern const char al_lua_session_call[];

/* SESSION_REPLY (worker) KEYS: al:res:<session>/<call>, al:out:<session>/<call>
 *         ARGV: result bytes, ttl ms, the result's status
 * A call's result and its live output's end entry, as a job's, once: an
 * answer already there stays. -> 1 written; 0 answered before */
extern const char al_lua_session_reply[];

/* SESSION_RENEW (worker) KEYS: al:sessions   ARGV: worker, lease ms,
 *         then session ids
 * Each open session the worker holds is leased until Redis's TIME plus
 * lease ms. -> the ids it did not renew (ended, or not the worker's) */
extern const char al_lua_session_renew[];

/* SESSION_END (worker) KEYS: record, al:sessions
 *         ARGV: reason, now ms, ttl ms, session id
 * Ends an open session: the record says ended and why and expires after
 * ttl, the tenant's count goes down. -> 1 ended, 0 already ended */
extern const char al_lua_session_end[];

/* SESSION_LOST (scheduler) KEYS: al:sessions   ARGV: now ms, ttl ms
 * Ends the open sessions whose lease ran out (at most 64 a call) with
 * reason worker_lost; one a worker was resuming is paused again (its
 * snapshot is whole), back on its resume queue if calls wait for it.
 * -> how many */
extern const char al_lua_session_lost[];

/* Paused sessions (contract.h al_session_pause_call ...; docs/snapshots.md).
 * A paused session's record says state paused, its snapshot (path,
 * snapshot_bytes, snapshot_sha256), the open job (job), what it had left
 * (life_left_ms, idle_ms, cpu_budget_ms, calls), paused_ms, paused_until
 * and rq, the queue a worker that can resume it reads; al:paused orders
 * them by paused_until; al:tenant:<t> field paused counts them. A call to
 * one (SESSION_CALL) waits on al:sq:<id> and, the first, puts its id on rq:
 * state resuming; a worker takes it (SESSION_TAKE), restores it, and
 * SESSION_RESUMED opens it again on that worker with the calls waiting. */
extern const char al_lua_session_pause[];
extern const char al_lua_session_fork[];
extern const char al_lua_session_take[];
extern const char al_lua_session_resumed[];
extern const char al_lua_session_drop[];
extern const char al_lua_paused_due[];
/* PAUSED_EXPIRE (the scheduler): paused sessions past paused_until by more
 * than a grace, which no worker ended (their worker gone: the files stay
 * where they are, for a worker's sweep). */
extern const char al_lua_paused_expire[];

/* Every script above, NULL-terminated (loaded with SCRIPT LOAD at connect). */
extern const char *const al_lua_all[];

/* True for a script that only reads (sent as EVALSHA_RO, so that a user
 * with read-only rights on its keys may run it). */
bool al_script_read_only(const char *script);

/* The script's SHA1 as 40 hex characters, for EVALSHA (computed once). */
const char *al_script_sha(const char *script);

#endif
