/* scripts.h - the Lua scripts that make every queue transition atomic in
 * Redis. Text only (no I/O); PROTOCOL.md lists each script's keys and
 * arguments, so a client in another language can use them too. */
#ifndef AL_SCRIPTS_H
#define AL_SCRIPTS_H

/* SUBMIT  (batch) per job, 3 KEYS: job hash, intake, idempotency key; and 7
 *         ARGV: id, job bytes, now ms, idempotency ttl s, has idempotency key
 *         (0/1), tier, tenant
 * -> per job: {1, id} accepted; {0, earlier id} same idempotency key;
 *    {-1, id} the id is taken */
extern const char al_lua_submit[];

/* ADMIT   (batch) KEYS: intake, then per job: job hash, ready stream,
 *         tenant hash, rate key   ARGV: intake group, then per job 12 values:
 *         id, job bytes (defaults filled), tier, tenant, max attempts, now ms,
 *         deadline ms, max queued (0 = none), rate per s (0 = none), band
 *         (hi/mid/lo), tenant's max running (0 = none), intake entry id
 * -> one code per job: 1 queued; 0 duplicate id; -1 already finished
 *    (cancelled before admission); -3 tenant queue full; -4 rate exceeded.
 *    The intake entry is acknowledged except on -3/-4, where the caller
 *    commits the rejection together with the entry. Tenant queued/running
 *    counters are kept only for jobs of tenants with a cap ("counted"). */
extern const char al_lua_admit[];

/* CLAIM   (batch) KEYS: one job hash per job   ARGV: worker, now ms, then
 *         one attempt per job (tenant and running cap from the job hash)
 * -> per job: {1, job} run it; {0} stale or finished: ack; {-2} unknown job;
 *    {-3, job} cancelled; {-4, job} past its deadline; {-5} tenant at max
 *    running */
extern const char al_lua_claim[];

/* FETCH   KEYS: the worker's ready streams, high band first
 *         ARGV: worker, now ms, count
 * Reads up to count new entries (XREADGROUP without blocking) and claims
 * each like CLAIM, in one round trip. -> per entry: {stream, entry id, job
 * id, attempt, code, job} with CLAIM's codes, or -9 for a malformed entry.
 * Empty when nothing waits: the worker then blocks in XREADGROUP. */
extern const char al_lua_fetch[];

/* COMMIT  (batch) per result, 6 KEYS: job hash, result, done list, ready
 *         stream (or ""), stats, tenant hash; and 6 ARGV: attempt (-1 = the
 *         job never reached a queue: allowed only while it is unknown or
 *         "submitted"), result bytes, ttl ms, entry id (or ""), group, status
 * -> per result: 1 committed; 0 a result already exists; -1 stale attempt
 *    (refused) */
extern const char al_lua_commit[];

/* RETRY   KEYS: job hash, delayed zset, ready stream, tenant hash
 *         ARGV: attempt, due ms, entry id, group, id, bump (1 = next attempt)
 * -> 1 scheduled; -1 stale attempt */
extern const char al_lua_retry[];

/* PROMOTE KEYS: delayed zset   ARGV: now ms, max count
 * Moves due retries to their tier's ready stream. -> number moved */
extern const char al_lua_promote[];

/* RECLAIM KEYS: job hash, result, ready stream, tenant hash
 *         ARGV: entry id, group, entry attempt
 * -> 1 re-queued as the next attempt; 0 stale/finished, acked;
 *    2 attempts used up (caller commits worker_lost); -2 unknown job */
extern const char al_lua_reclaim[];

/* CANCEL  KEYS: job hash, result, done list, stats, tenant hash
 *         ARGV: id, cancelled result bytes, ttl ms
 * -> 1 was waiting: cancelled result committed; 2 running: kill requested;
 *    0 already finished; -1 unknown */
extern const char al_lua_cancel[];

/* EXPIRE  KEYS: job hash, result, done list, stats, deadlines zset
 *         ARGV: id, expired result bytes, ttl ms
 * -> 1 expired while waiting; 0 running, finished or unknown */
extern const char al_lua_expire[];

/* TRIM    KEYS: stream   ARGV: group
 * Acknowledged entries are not deleted one by one (XDEL is costly): this
 * trims every entry before the group's first pending entry, or up to its
 * last delivered one. -> {trimmed, lag (waiting, -1 unknown), pending} */
extern const char al_lua_trim[];

/* Every script above, NULL-terminated (loaded with SCRIPT LOAD at connect). */
extern const char *const al_lua_all[];

/* The script's SHA1 as 40 hex characters, for EVALSHA (computed once). */
const char *al_script_sha(const char *script);

#endif
