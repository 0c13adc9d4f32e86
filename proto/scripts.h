/* scripts.h - the Lua scripts that make every queue transition atomic in
 * Redis. Text only (no I/O); PROTOCOL.md lists each script's keys and
 * arguments, so a client in another language can use them too. */
#ifndef AL_SCRIPTS_H
#define AL_SCRIPTS_H

/* SUBMIT  KEYS: job hash, intake, idem key   ARGV: id, job bytes, now ms,
 *         idem ttl s, has idem (0/1), tier, tenant
 * -> {1, id} accepted; {0, earlier id} same idempotency key; {-1, id} id taken */
extern const char al_lua_submit[];

/* ADMIT   KEYS: job hash, ready stream, tenant hash, rate key
 *         ARGV: id, job bytes (defaults filled), tier, tenant, max attempts,
 *         now ms, deadline ms, max queued (0 = none), rate per s (0 = none),
 *         band (hi/mid/lo), tenant's max running (0 = none)
 * -> 1 queued; 0 duplicate id; -1 already finished (cancelled before
 *    admission); -3 tenant queue full; -4 rate exceeded */
extern const char al_lua_admit[];

/* CLAIM   KEYS: job hash, result   ARGV: attempt, worker, now ms
 *         (the tenant and its running cap come from the job hash)
 * -> {1, job} run it; {0} stale or finished: ack; {-2} unknown job;
 *    {-3} cancelled; {-4} past its deadline; {-5} tenant at max running */
extern const char al_lua_claim[];

/* COMMIT  KEYS: job hash, result, done list, ready stream (or ""), stats,
 *         tenant hash   ARGV: attempt (-1 = the job never reached a queue:
 *         allowed only while it is unknown or "submitted"), result bytes,
 *         ttl ms, entry id (or ""), group, status, and optionally tier,
 *         backend, queue wait ms, run ms (for the histograms)
 * -> 1 committed; 0 a result already exists; -1 stale attempt (refused) */
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

#endif
