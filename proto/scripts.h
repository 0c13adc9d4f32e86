/* scripts.h - the Lua scripts that make every queue transition atomic in
 * Redis. Text only (no I/O); PROTOCOL.md lists each script's keys and
 * arguments, so a client in another language can use them too. */
#ifndef AL_SCRIPTS_H
#define AL_SCRIPTS_H

/* Each script's keys, arguments and answers. The typed builders in
 * contract.h fill them; PROTOCOL.md ("Scripts") says the same for clients in
 * other languages. A script that moves a tenant's counters takes the tenant
 * from the job's record (al:job:<id> field tenant), never from its caller. */

/* SUBMIT  (batch) per job, 3 KEYS: job hash, intake, idempotency key; and 7
 *         ARGV: id, job bytes, now ms, idempotency ttl s, has idempotency key
 *         (0/1), tier, tenant
 * -> per job: {1, id} accepted (record made, entry id kept in it);
 *    {0, earlier id} same idempotency key; {-1, id} the id is taken */
extern const char al_lua_submit[];

/* ADMIT   (batch) KEYS: intake, then per job: job hash, ready stream
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
 * Reads up to count new entries (XREADGROUP without blocking) and claims
 * each like CLAIM, in one round trip. -> per entry: {stream, entry id, job
 * id, attempt, code, job} with CLAIM's codes, or AL_CLAIM_MALFORMED.
 * Empty when nothing waits: the worker then blocks in XREADGROUP. */
extern const char al_lua_fetch[];

/* COMMIT  (batch) per result, 4 KEYS: job hash, result, done list, stream
 *         the entry is in (or ""); and 6 ARGV: attempt (-1 = the job never
 *         reached a queue: allowed only while it is unknown or "submitted",
 *         and only for the intake entry that made the record), result bytes,
 *         ttl ms, entry id (or ""), group, status
 * -> per result (enum al_commit_code) */
extern const char al_lua_commit[];

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

/* CANCEL  KEYS: job hash, result, done list
 *         ARGV: id, cancelled result bytes, ttl ms
 * -> enum al_cancel_code */
extern const char al_lua_cancel[];

/* EXPIRE  KEYS: job hash, result, done list, deadlines zset
 *         ARGV: id, expired result bytes, ttl ms
 * -> 1 expired while waiting; 0 running, finished or unknown */
extern const char al_lua_expire[];

/* TRIM    KEYS: stream   ARGV: group
 * Acknowledged entries are not deleted one by one (XDEL is costly): this
 * trims every entry before the group's first pending entry, or up to its
 * last delivered one. -> {trimmed, lag (waiting, -1 unknown), pending} */
extern const char al_lua_trim[];

/* REARM   KEYS: done list, result   ARGV: none
 * A waiter whose BLPOP took the done token puts it back with the result's
 * remaining TTL, so that other waiters wake too and nothing outlives the
 * result. -> 1 put back; 0 no result (expired or never written) */
extern const char al_lua_rearm[];

/* GIVE_BACK KEYS: ready stream   ARGV: group, entry id
 * A delivered, unclaimed entry goes back to the end of its stream (re-added
 * and acknowledged together). -> XACK's count */
extern const char al_lua_give_back[];

/* Every script above, NULL-terminated (loaded with SCRIPT LOAD at connect). */
extern const char *const al_lua_all[];

/* The script's SHA1 as 40 hex characters, for EVALSHA (computed once). */
const char *al_script_sha(const char *script);

#endif
