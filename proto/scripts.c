/* scripts.c - the Lua scripts of every queue transition (see scripts.h). */
#include "scripts.h"

#include <openssl/sha.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "keys.h"

/* Shared fragments are repeated inline: Redis runs each script alone. */

/* The caller may write only its own submission's marker (al:sub:<id>) and
 * idempotency key, declared as KEYS; the intake (append only) and the job
 * record (read only) are named inside, because Redis checks a script's
 * declared keys for read and write rights. */
const char al_lua_submit[] =
    "local out = {}\n"
    "for i = 0, #KEYS / 2 - 1 do\n"
    "  local K, A = 2 * i, 7 * i\n"
    "  local id = ARGV[A + 1]\n"
    "  local r\n"
    "  local prev = ARGV[A + 5] == '1' and redis.call('GET', KEYS[K + 2])\n"
    "  if prev then r = {0, prev}\n"
    "  elseif redis.call('EXISTS', KEYS[K + 1], '" AL_KEY_PREFIX
    "job:' .. id) > 0 then r = {-1, id}\n"
    "  else\n"
    "    local e = redis.call('XADD', '" AL_KEY_INTAKE "', '*', 'id', id, 'job', ARGV[A + 2])\n"
    "    redis.call('SET', KEYS[K + 1], e .. ' ' .. ARGV[A + 7] .. ' ' .. ARGV[A + 6], 'EX',"
    " ARGV[A + 4])\n"
    "    if ARGV[A + 5] == '1' then redis.call('SET', KEYS[K + 2], id, 'EX', ARGV[A + 4]) end\n"
    "    r = {1, id}\n"
    "  end\n"
    "  out[i + 1] = r\n"
    "end\n"
    "return out\n";

const char al_lua_lookup[] = "local h = redis.call('HMGET', KEYS[1], 'state', 'tenant')\n"
			     "if h[1] then return h end\n"
			     "local m = redis.call('GET', KEYS[2])\n"
			     "if m then return {'submitted', string.match(m, '^%S+ (%S*)')} end\n"
			     "return {false, false}\n";

/* A submission's marker: its intake entry, tenant and tier, or nothing.
 * A marker is a string "<entry> <tenant> <tier>"; an earlier release's
 * hash (entry, tenant, tier fields) is still read, so that a submission
 * made before an upgrade is admitted after it. */
#define MARKER_FN                                                                                  \
	"local function marker(k)\n"                                                               \
	"  local m = redis.pcall('GET', k)\n"                                                      \
	"  if type(m) == 'table' then\n"                                                           \
	"    local h = redis.call('HMGET', k, 'entry', 'tenant', 'tier')\n"                        \
	"    return h[1], h[2], h[3]\n"                                                            \
	"  end\n"                                                                                  \
	"  if m then return string.match(m, '^(%S+) (%S*) ?(%S*)') end\n"                          \
	"end\n"

/* Acknowledgements (and COMMIT's status counters) are collected and sent
 * once per call. */
const char al_lua_admit[] = MARKER_FN
    "local out, acks = {}, {}\n"
    "local n = (#ARGV - 1) / 12\n"
    "for i = 0, n - 1 do\n"
    "  local K = 1 + 3 * i\n"
    "  local A = 1 + 12 * i\n"
    "  local entry = ARGV[A + 12]\n"
    "  local owner = marker(KEYS[K + 2])\n"
    "  local st\n"
    "  if owner ~= entry then\n"
    "    local h = redis.call('HMGET', KEYS[K + 1], 'state', 'entry')\n"
    "    st, owner = h[1], h[2] or owner\n"
    "  end\n"
    "  local code\n"
    "  if owner and owner ~= entry then code = -2\n"
    "  elseif st == 'done' then code = -1\n"
    "  elseif st then code = 0\n"
    "  else\n"
    "    local tenant = ARGV[A + 4]\n"
    "    local maxq = tonumber(ARGV[A + 8])\n"
    "    local counted = (maxq > 0 or tonumber(ARGV[A + 11]) > 0) and '1' or '0'\n"
    "    local tk = counted == '1' and 'al:tenant:' .. tenant\n"
    "    if maxq > 0 and tonumber(redis.call('HGET', tk, 'queued') or '0') >= maxq then\n"
    "      code = -3\n"
    "    end\n"
    "    local rate = tonumber(ARGV[A + 9])\n"
    "    if not code and rate > 0 then\n"
    "      local rk = 'al:rate:' .. tenant .. ':' .. math.floor(tonumber(ARGV[A + 6]) / 1000)\n"
    "      local c = redis.call('INCR', rk)\n"
    "      if c == 1 then redis.call('PEXPIRE', rk, 2000) end\n"
    "      if c > rate then code = -4 end\n"
    "    end\n"
    "    if not code then\n"
    "      redis.call('HSET', KEYS[K + 1], 'state', 'queued', 'job', ARGV[A + 2], 'tier', ARGV[A + "
    "3],"
    " 'tenant', tenant, 'attempt', '1', 'max_attempts', ARGV[A + 5], 'queued_ms', ARGV[A + 6],"
    " 'deadline_ms', ARGV[A + 7], 'band', ARGV[A + 10], 'max_running', ARGV[A + 11],"
    " 'counted', counted, 'entry', entry)\n"
    "      if counted == '1' then redis.call('HINCRBY', tk, 'queued', 1) end\n"
    "      if tonumber(ARGV[A + 7]) > 0 then\n"
    "        redis.call('ZADD', 'al:deadlines', ARGV[A + 7], ARGV[A + 1]) end\n"
    "      redis.call('XADD', KEYS[K + 3], '*', 'id', ARGV[A + 1], 'attempt', '1')\n"
    "      redis.call('DEL', KEYS[K + 2])\n"
    "      code = 1\n"
    "    end\n"
    "  end\n"
    "  if code ~= -3 and code ~= -4 then acks[#acks + 1] = entry end\n"
    "  out[i + 1] = code\n"
    "end\n"
    "if #acks > 0 then redis.call('XACK', KEYS[1], ARGV[1], unpack(acks)) end\n"
    "return out\n";

/* Claim one delivered entry: the heart of CLAIM and FETCH. A second claim
 * of the same attempt by the same worker answers as the first (the worker
 * sends CLAIM again when its answer was lost). */
#define CLAIM_ONE                                                                                  \
	"local function claim_one(jk, att, worker, now)\n"                                         \
	"  local h = redis.call('HMGET', jk, 'attempt', 'job', 'cancel', 'deadline_ms', 'state',"  \
	" 'tenant', 'max_running', 'counted', 'worker')\n"                                         \
	"  local dl = tonumber(h[4] or '0') or 0\n"                                                \
	"  local maxr = tonumber(h[7] or '0') or 0\n"                                              \
	"  if not h[2] then return {-2} end\n"                                                     \
	"  if tonumber(h[1]) ~= tonumber(att) then return {0} end\n"                               \
	"  if h[5] == 'running' and h[9] == worker then return {1, h[2]} end\n"                    \
	"  if h[5] ~= 'queued' then return {0} end\n"                                              \
	"  if h[3] == '1' then return {-3, h[2]} end\n"                                            \
	"  if dl > 0 and tonumber(now) > dl then return {-4, h[2]} end\n"                          \
	"  local tk = (maxr > 0 or h[8] == '1') and 'al:tenant:' .. (h[6] or 'default')\n"         \
	"  if maxr > 0 and tonumber(redis.call('HGET', tk, 'running') or '0') >= maxr then\n"      \
	"    return {-5} end\n"                                                                    \
	"  redis.call('HSET', jk, 'state', 'running', 'worker', worker, 'started_ms', now)\n"      \
	"  if h[8] == '1' then\n"                                                                  \
	"    redis.call('HINCRBY', tk, 'queued', -1); redis.call('HINCRBY', tk, 'running', 1)\n"   \
	"  end\n"                                                                                  \
	"  return {1, h[2]}\n"                                                                     \
	"end\n"

const char al_lua_claim[] =
    CLAIM_ONE "local out = {}\n"
	      "for i = 0, #ARGV - 3 do\n"
	      "  out[i + 1] = claim_one(KEYS[i + 1], ARGV[3 + i], ARGV[1], ARGV[2])\n"
	      "end\n"
	      "return out\n";

/* Read up to count new entries of streams (high band first) for worker and
 * claim each: the heart of FETCH and COMMIT_FETCH. One XREADGROUP a stream,
 * for what is left of count: COUNT is per stream, so one read of them all
 * could deliver count from each band, more than the slots asked for, and
 * would take lower bands' jobs while a higher band still had some. */
#define FETCH_FN                                                                                   \
	"local function fetch(streams, worker, now, count)\n"                                      \
	"  local out, left = {}, tonumber(count)\n"                                                \
	"  for _, k in ipairs(streams) do\n"                                                       \
	"    if left < 1 then break end\n"                                                         \
	"    local got = redis.call('XREADGROUP', 'GROUP', 'workers', worker, 'COUNT', left,"      \
	" 'STREAMS', k, '>')\n"                                                                    \
	"    for _, e in ipairs(got and got[1][2] or {}) do\n"                                     \
	"      local v, id, att = e[2]\n"                                                          \
	"      if #v == 4 and v[1] == 'id' and v[3] == 'attempt' then id, att = v[2], v[4]\n"      \
	"      else\n"                                                                             \
	"        local f = {}\n"                                                                   \
	"        for i = 1, #v, 2 do f[v[i]] = v[i + 1] end\n"                                     \
	"        id, att = f['id'], f['attempt']\n"                                                \
	"      end\n"                                                                              \
	"      local r\n"                                                                          \
	"      if not id or not att or not string.match(id, '^[%w%.:_-]+$') then r = {-9}\n"       \
	"      else r = claim_one('al:job:' .. id, att, worker, now) end\n"                        \
	"      out[#out + 1] = {k, e[1], id or '', att or '0', r[1], r[2]}\n"                      \
	"      left = left - 1\n"                                                                  \
	"    end\n"                                                                                \
	"  end\n"                                                                                  \
	"  return out\n"                                                                           \
	"end\n"

const char al_lua_fetch[] = CLAIM_ONE FETCH_FN "return fetch(KEYS, ARGV[1], ARGV[2], ARGV[3])\n";

/* The live-output stream's last entry, by whichever script writes the
 * result: readers see the end without polling for the result. */
#define END_OUT                                                                                    \
	"local function end_out(key, status, attempt, ttl)\n"                                      \
	"  redis.call('XADD', key, '*', 't', 'end', 's', status, 'a', attempt)\n"                  \
	"  redis.call('PEXPIRE', key, ttl)\n"                                                      \
	"end\n"

/* One result of a COMMIT batch: K, A its first key and argument less one.
 * Acknowledgements and status counts are gathered for COMMIT_END. */
#define COMMIT_ONE                                                                                 \
	"local acks, counts = {}, {}\n"                                                            \
	"local function ack(K, A)\n"                                                               \
	"  local e = ARGV[A + 4]\n"                                                                \
	"  if e == '' then return end\n"                                                           \
	"  local s, g = KEYS[K + 3], ARGV[A + 5]\n"                                                \
	"  local t = acks[s]\n"                                                                    \
	"  if not t then t = {}; acks[s] = t end\n"                                                \
	"  local l = t[g]\n"                                                                       \
	"  if not l then l = {s, g}; t[g] = l end\n"                                               \
	"  l[#l + 1] = e\n"                                                                        \
	"end\n"                                                                                    \
	"local function commit_one(K, A)\n"                                                        \
	"  local h = redis.call('HMGET', KEYS[K + 1], 'attempt', 'state', 'counted', 'tenant')\n"  \
	"  if h[2] == 'done' then ack(K, A); return 0 end\n"                                       \
	"  if not h[1] or tonumber(h[1]) ~= tonumber(ARGV[A + 1]) then return -1 end\n"            \
	"  local ttl = ARGV[A + 3]\n"                                                              \
	"  redis.call('SET', KEYS[K + 2], ARGV[A + 2], 'PX', ttl)\n"                               \
	"  if h[3] == '1' then\n"                                                                  \
	"    local tk = 'al:tenant:' .. (h[4] or 'default')\n"                                     \
	"    if h[2] == 'running' then redis.call('HINCRBY', tk, 'running', -1)\n"                 \
	"    elseif h[2] == 'queued' or h[2] == 'retrying' then\n"                                 \
	"      redis.call('HINCRBY', tk, 'queued', -1) end\n"                                      \
	"  end\n"                                                                                  \
	"  redis.call('HSET', KEYS[K + 1], 'state', 'done', 'status', ARGV[A + 6])\n"              \
	"  redis.call('PEXPIRE', KEYS[K + 1], ttl)\n"                                              \
	"  end_out(KEYS[K + 4], ARGV[A + 6], ARGV[A + 1], ttl)\n"                                  \
	"  counts[ARGV[A + 6]] = (counts[ARGV[A + 6]] or 0) + 1\n"                                 \
	"  ack(K, A)\n"                                                                            \
	"  return 1\n"                                                                             \
	"end\n"
#define COMMIT_END                                                                                 \
	"for _, t in pairs(acks) do\n"                                                             \
	"  for _, a in pairs(t) do redis.call('XACK', unpack(a)) end\n"                            \
	"end\n"                                                                                    \
	"for s, n in pairs(counts) do redis.call('HINCRBY', 'al:stats', 'status:' .. s, n) end\n"

const char al_lua_commit[] = END_OUT COMMIT_ONE
    "local out = {}\n"
    "for i = 0, #KEYS / 4 - 1 do out[i + 1] = commit_one(4 * i, 6 * i) end\n" COMMIT_END
    "return out\n";

/* COMMIT's batch, then FETCH's read and claim for the worker whose slots
 * the batch freed: one script call where there were two. */
const char al_lua_commit_fetch[] = END_OUT CLAIM_ONE COMMIT_ONE FETCH_FN
    "local n = tonumber(ARGV[#ARGV])\n"
    "local out, streams = {}, {}\n"
    "for i = 0, n - 1 do out[i + 1] = commit_one(4 * i, 6 * i) end\n" COMMIT_END
    "for i = 4 * n + 1, #KEYS do streams[#streams + 1] = KEYS[i] end\n"
    "return {out, fetch(streams, ARGV[#ARGV - 3], ARGV[#ARGV - 2], ARGV[#ARGV - 1])}\n";

/* The result of a submission that never reached a queue (rejected). Its
 * record is made here, done, with the tenant and tier of the submission's
 * marker (so that the gateway shows the tenant its own rejection). */
const char al_lua_reject[] = END_OUT MARKER_FN
    "local function ack() redis.call('XACK', KEYS[5], ARGV[5], ARGV[4]) end\n"
    "local h = redis.call('HMGET', KEYS[1], 'state', 'entry')\n"
    "local s = {marker(KEYS[4])}\n"
    "local owner = h[2] or s[1]\n"
    "if owner and owner ~= ARGV[4] then ack(); return -2 end\n"
    "if h[1] == 'done' then ack(); return 0 end\n"
    "if h[1] then ack(); return -1 end\n"
    "redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])\n"
    "redis.call('HSET', KEYS[1], 'state', 'done', 'status', ARGV[6], 'entry', ARGV[4])\n"
    "if s[2] then redis.call('HSET', KEYS[1], 'tenant', s[2], 'tier', s[3] or '') end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "redis.call('DEL', KEYS[4])\n"
    "end_out(KEYS[3], ARGV[6], '0', ARGV[3])\n"
    "redis.call('HINCRBY', 'al:stats', 'status:' .. ARGV[6], 1)\n"
    "ack()\n"
    "return 1\n";

const char al_lua_retry[] =
    "local h = redis.call('HMGET', KEYS[1], 'attempt', 'state', 'counted', 'tenant')\n"
    "if not h[1] or tonumber(h[1]) ~= tonumber(ARGV[1]) or h[2] == 'done' then return -1 end\n"
    "local a = tonumber(h[1])\n"
    "if ARGV[6] == '1' then a = a + 1; redis.call('HINCRBY', 'al:stats', 'retries', 1) end\n"
    "redis.call('HSET', KEYS[1], 'attempt', a, 'state', 'retrying')\n"
    "if h[2] == 'running' and h[3] == '1' then\n"
    "  local tk = 'al:tenant:' .. (h[4] or 'default')\n"
    "  redis.call('HINCRBY', tk, 'running', -1); redis.call('HINCRBY', tk, 'queued', 1)\n"
    "end\n"
    "redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])\n"
    "redis.call('XACK', KEYS[3], ARGV[4], ARGV[3])\n"
    "return 1\n";

const char al_lua_promote[] =
    "local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])\n"
    "local n = 0\n"
    "for _, id in ipairs(ids) do\n"
    "  redis.call('ZREM', KEYS[1], id)\n"
    "  local h = redis.call('HMGET', 'al:job:' .. id, 'tier', 'attempt', 'band', 'state')\n"
    "  if h[1] and h[4] == 'retrying' then\n"
    "    redis.call('HSET', 'al:job:' .. id, 'state', 'queued')\n"
    "    redis.call('XADD', 'al:q:' .. h[1] .. ':' .. (h[3] or 'mid'), '*', 'id', id,"
    " 'attempt', h[2])\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";

const char al_lua_reclaim[] =
    "local function ack()\n"
    "  redis.call('XACK', KEYS[3], ARGV[2], ARGV[1])\n"
    "end\n"
    "if redis.call('EXISTS', KEYS[2]) == 1 then ack(); return 0 end\n"
    "local h = redis.call('HMGET', KEYS[1], 'attempt', 'max_attempts', 'state', 'counted', "
    "'tenant')\n"
    "if not h[1] then ack(); return -2 end\n"
    "if tonumber(h[1]) ~= tonumber(ARGV[3]) or h[3] == 'done' then ack(); return 0 end\n"
    "if tonumber(h[1]) >= tonumber(h[2]) then return 2 end\n"
    "if h[3] == 'running' and h[4] == '1' then\n"
    "  local tk = 'al:tenant:' .. (h[5] or 'default')\n"
    "  redis.call('HINCRBY', tk, 'running', -1); redis.call('HINCRBY', tk, 'queued', 1)\n"
    "end\n"
    "local a = tonumber(h[1]) + 1\n"
    "redis.call('HSET', KEYS[1], 'attempt', a, 'state', 'queued')\n"
    "redis.call('HINCRBY', 'al:stats', 'reclaimed', 1)\n"
    "redis.call('XADD', KEYS[3], '*', 'id', ARGV[4], 'attempt', a)\n"
    "ack()\n"
    "return 1\n";

/* Run by the scheduler for a cancel request read from the intake: the
 * answer goes to the request's reply list and the entry is acknowledged in
 * the same step. A job still waiting for admission (only its marker
 * exists) gets its record here, ended; ADMIT then finds it done. */
const char al_lua_cancel[] = END_OUT MARKER_FN
    "local function answer(code)\n"
    "  redis.call('XACK', KEYS[5], ARGV[4], ARGV[5])\n"
    "  redis.call('RPUSH', KEYS[6], code)\n"
    "  redis.call('PEXPIRE', KEYS[6], ARGV[6])\n"
    "  return code\n"
    "end\n"
    "if redis.call('EXISTS', KEYS[2]) == 1 then return answer(0) end\n"
    "local h = redis.call('HMGET', KEYS[1], 'state', 'counted', 'tenant')\n"
    "local st = h[1]\n"
    "if not st then\n"
    "  local s = {marker(KEYS[4])}\n"
    "  if not s[1] then return answer(-1) end\n"
    "  redis.call('HSET', KEYS[1], 'entry', s[1], 'tenant', s[2] or '', 'tier', s[3] or '')\n"
    "  redis.call('DEL', KEYS[4])\n"
    "  st = 'submitted'\n"
    "end\n"
    "if st == 'done' then return answer(0) end\n"
    "redis.call('HSET', KEYS[1], 'cancel', '1')\n"
    "if st == 'running' then\n"
    "  redis.call('PUBLISH', '" AL_KEY_CANCEL_CHANNEL "', ARGV[1])\n"
    "  return answer(2)\n"
    "end\n"
    "redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])\n"
    "if (st == 'queued' or st == 'retrying') and h[2] == '1' then\n"
    "  redis.call('HINCRBY', 'al:tenant:' .. (h[3] or 'default'), 'queued', -1) end\n"
    "redis.call('HSET', KEYS[1], 'state', 'done', 'status', 'cancelled')\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "end_out(KEYS[3], 'cancelled', '0', ARGV[3])\n"
    "redis.call('HINCRBY', 'al:stats', 'status:cancelled', 1)\n"
    "return answer(1)\n";

const char al_lua_expire[] = END_OUT
    "local h = redis.call('HMGET', KEYS[1], 'state', 'tenant', 'counted')\n"
    "redis.call('ZREM', KEYS[4], ARGV[1])\n"
    "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end\n"
    "if h[1] ~= 'queued' and h[1] ~= 'retrying' then return 0 end\n"
    "redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])\n"
    "if h[3] == '1' then redis.call('HINCRBY', 'al:tenant:' .. (h[2] or 'default'), 'queued', -1) "
    "end\n"
    "redis.call('HSET', KEYS[1], 'state', 'done', 'status', 'expired')\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "end_out(KEYS[3], 'expired', '0', ARGV[3])\n"
    "redis.call('HINCRBY', 'al:stats', 'status:expired', 1)\n"
    "return 1\n";

const char al_lua_trim[] =
    "local last, lag = nil, 0\n"
    "for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do\n"
    "  local f = {}\n"
    "  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end\n"
    "  if f['name'] == ARGV[1] then last = f['last-delivered-id']; lag = f['lag'] end\n"
    "end\n"
    "if not last then return {0, 0, 0} end\n"
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1])\n"
    "local ms, seq = string.match(last, '(%d+)-(%d+)')\n"
    "local cut = ms .. '-' .. (tonumber(seq) + 1)\n"
    "if p[1] > 0 then cut = p[2] end\n"
    "local n = redis.call('XTRIM', KEYS[1], 'MINID', cut)\n"
    "if type(lag) ~= 'number' then lag = -1 end\n"
    "return {n, lag, p[1]}\n";

/* Read only: the result, or the live output's newest entry id to wait
 * after (an end entry written later comes after it). */
const char al_lua_await[] = "local r = redis.call('GET', KEYS[1])\n"
			    "if r then return {1, r} end\n"
			    "local e = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)\n"
			    "return {0, e[1] and e[1][1] or '0-0'}\n";

const char al_lua_give_back[] =
    "local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])\n"
    "if #e == 1 then redis.call('XADD', KEYS[1], '*', unpack(e[1][2])) end\n"
    "return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n";

/* The workers' summary for the metrics: live workers (their al:worker:<id>
 * exists), busy and total slots, held jobs, paused backends. */
const char al_lua_workers[] =
    "local live, busy, slots, held, paused, other = 0, 0, 0, 0, 0, 0\n"
    "local mine = '\"policy\":\"' .. ARGV[1] .. '\"'\n"
    "local all = redis.call('HGETALL', KEYS[1])\n"
    "for i = 1, #all, 2 do\n"
    "  if redis.call('EXISTS', '" AL_KEY_PREFIX "worker:' .. all[i]) == 1 then\n"
    "    live = live + 1\n"
    "    busy = busy + (tonumber(string.match(all[i+1], '\"busy\":(%d+)')) or 0)\n"
    "    slots = slots + (tonumber(string.match(all[i+1], '\"slots\":(%d+)')) or 0)\n"
    "    held = held + (tonumber(string.match(all[i+1], '\"held\":(%d+)')) or 0)\n"
    "    if string.find(all[i+1], '\"paused\":{\"', 1, true) then paused = paused + 1 end\n"
    "    if not string.find(all[i+1], mine, 1, true) then other = other + 1 end\n"
    "  end\n"
    "end\n"
    "return {live, busy, slots, held, paused, other}\n";

const char al_lua_vm_end_due[] =
    "local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 32)\n"
    "for _, name in ipairs(due) do\n"
    "  local k = '" AL_KEY_VM_PREFIX "' .. name\n"
    "  local why = redis.call('HGET', k, 'stop_reason') or 'lease expired'\n"
    "  redis.call('ZREM', KEYS[1], name)\n"
    "  redis.call('HSET', k, 'state', 'ended', 'reason', why, 'ended_ms', ARGV[1])\n"
    "  redis.call('PEXPIRE', k, ARGV[2])\n"
    "end\n"
    "return due\n";

const char al_lua_vm_end_one[] =
    "if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then\n"
    "  local k = '" AL_KEY_VM_PREFIX "' .. ARGV[1]\n"
    "  redis.call('HSET', k, 'state', 'ended', 'reason', ARGV[2], 'ended_ms', ARGV[3])\n"
    "  redis.call('PEXPIRE', k, ARGV[4])\n"
    "end\n"
    "return 1\n";

/* End open session sid (record k) for reason r at now, expiring after ttl:
 * SESSION_END and SESSION_LOST. */
#define SESSION_END_ONE                                                                            \
	"local function end_one(k, sid, r, now, ttl)\n"                                            \
	"  local st = redis.call('HGET', k, 'state')\n"                                            \
	"  if st ~= 'open' and st ~= 'paused' and st ~= 'resuming' then return 0 end\n"            \
	"  redis.call('HSET', k, 'state', 'ended', 'reason', r, 'ended_ms', now)\n"                \
	"  redis.call('HDEL', k, 'seen')\n"                                                        \
	"  redis.call('PEXPIRE', k, ttl)\n"                                                        \
	"  redis.call('ZREM', '" AL_KEY_SESSIONS "', sid)\n"                                       \
	"  redis.call('ZREM', '" AL_KEY_PAUSED "', sid)\n"                                         \
	"  local t = '" AL_KEY_PREFIX                                                              \
	"tenant:' .. (redis.call('HGET', k, 'tenant') or 'default')\n"                             \
	"  local f = st == 'open' and 'sessions' or 'paused'\n"                                    \
	"  if tonumber(redis.call('HGET', t, f) or '0') > 0 then\n"                                \
	"    redis.call('HINCRBY', t, f, -1)\n"                                                    \
	"  end\n"                                                                                  \
	"  return 1\n"                                                                             \
	"end\n"

/* Redis's TIME in ms, as now. */
#define NOW_MS                                                                                     \
	"local tm = redis.call('TIME')\n"                                                          \
	"local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"

const char al_lua_session_open[] =
    "local n = tonumber(redis.call('HGET', KEYS[2], 'sessions') or '0')\n"
    "if n >= tonumber(ARGV[6]) then return {0, n} end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('HINCRBY', KEYS[2], 'sessions', 1)\n"
    "redis.call('HSET', KEYS[1], 'tenant', ARGV[1], 'tier', ARGV[2], 'worker', ARGV[3],\n"
    "  'state', 'open', 'opened_ms', now, 'lease_ms', now + tonumber(ARGV[5]),\n"
    "  'life_ms', now + tonumber(ARGV[7]))\n"
    "redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[8])\n"
    "return {1, n + 1}\n";

/* The text values of fields id, session and tenant of the msgpack map b
 * (a field whose value is not text reads as false): SESSION_CALL's check.
 * Redis's cmsgpack knows no bin type, so the map is walked here: headers
 * read, everything else skipped by its length, nested items counted, never
 * past the end (an error, which the caller's pcall takes). */
#define MP_FIELDS                                                                                  \
	"local function mp_fields(b)\n"                                                            \
	"  local p = 1\n"                                                                          \
	"  local function u(n)\n"                                                                  \
	"    if p + n - 1 > #b then error('short') end\n"                                          \
	"    local v = 0\n"                                                                        \
	"    for i = p, p + n - 1 do v = v * 256 + string.byte(b, i) end\n"                        \
	"    p = p + n\n"                                                                          \
	"    return v\n"                                                                           \
	"  end\n"                                                                                  \
	"  local fixed = {[0xca] = 4, [0xcb] = 8, [0xcc] = 1, [0xcd] = 2, [0xce] = 4, [0xcf] = "   \
	"8,\n"                                                                                     \
	"    [0xd0] = 1, [0xd1] = 2, [0xd2] = 4, [0xd3] = 8, [0xd4] = 2, [0xd5] = 3, [0xd6] = "    \
	"5,\n"                                                                                     \
	"    [0xd7] = 9, [0xd8] = 17}\n"                                                           \
	"  local sized = {[0xd9] = {'s', 1}, [0xda] = {'s', 2}, [0xdb] = {'s', 4},\n"              \
	"    [0xc4] = {'b', 1}, [0xc5] = {'b', 2}, [0xc6] = {'b', 4}, [0xdc] = {'a', 2},\n"        \
	"    [0xdd] = {'a', 4}, [0xde] = {'m', 2}, [0xdf] = {'m', 4}}\n"                           \
	"  local function head()\n"                                                                \
	"    local t = u(1)\n"                                                                     \
	"    if t < 0x80 or t >= 0xe0 or t == 0xc0 or t == 0xc2 or t == 0xc3 then return 'x', 0 "  \
	"end\n"                                                                                    \
	"    if t < 0x90 then return 'm', t - 0x80 end\n"                                          \
	"    if t < 0xa0 then return 'a', t - 0x90 end\n"                                          \
	"    if t < 0xc0 then return 's', t - 0xa0 end\n"                                          \
	"    if fixed[t] then return 'b', fixed[t] end\n"                                          \
	"    if t >= 0xc7 and t <= 0xc9 then return 'b', u(2 ^ (t - 0xc7)) + 1 end\n"              \
	"    if sized[t] then return sized[t][1], u(sized[t][2]) end\n"                            \
	"    error('bad')\n"                                                                       \
	"  end\n"                                                                                  \
	"  local function body(k, n)\n"                                                            \
	"    if k == 'm' then n = 2 * n elseif k ~= 'a' then p = p + n; n = 0 end\n"               \
	"    while n > 0 do\n"                                                                     \
	"      local k2, n2 = head()\n"                                                            \
	"      if k2 == 'a' then n = n + n2 elseif k2 == 'm' then n = n + 2 * n2\n"                \
	"      elseif k2 ~= 'x' then p = p + n2 end\n"                                             \
	"      n = n - 1\n"                                                                        \
	"    end\n"                                                                                \
	"    if p > #b + 1 then error('short') end\n"                                              \
	"  end\n"                                                                                  \
	"  local k, n = head()\n"                                                                  \
	"  if k ~= 'm' then error('not a map') end\n"                                              \
	"  local got = {}\n"                                                                       \
	"  for _ = 1, n do\n"                                                                      \
	"    local kk, kn = head()\n"                                                              \
	"    local key = kk == 's' and string.sub(b, p, p + kn - 1)\n"                             \
	"    body(kk, kn)\n"                                                                       \
	"    local vk, vn = head()\n"                                                              \
	"    if vk == 's' and (key == 'id' or key == 'session' or key == 'tenant' or key == "      \
	"'op') "                                                                                   \
	"then\n"                                                                                   \
	"      got[key] = string.sub(b, p, p + vn - 1)\n"                                          \
	"    elseif key then got[key] = false end\n"                                               \
	"    body(vk, vn)\n"                                                                       \
	"  end\n"                                                                                  \
	"  if p ~= #b + 1 then error('trailing bytes') end\n"                                      \
	"  return got\n"                                                                           \
	"end\n"

const char al_lua_session_call[] = MP_FIELDS
    "local ok, f = pcall(mp_fields, ARGV[3])\n"
    "if not ok then return {3, 'the call is not one msgpack map'} end\n"
    "if f.session ~= ARGV[1] then\n"
    "  return {3, 'session: the call names another session than it is queued for'}\n"
    "end\n"
    "if f.tenant == false or (f.tenant or 'default') ~= ARGV[2] then\n"
    "  return {3, 'tenant: the call names another tenant than it is queued as'}\n"
    "end\n"
    "if not f.id or #f.id > 64 or not string.match(f.id, '^[%w%._:%-]+$') then\n"
    "  return {3, 'id: expected 1..64 of [A-Za-z0-9._:-]'}\n"
    "end\n"
    "local k = '" AL_KEY_PREFIX "sess:' .. ARGV[1]\n"
    "local r = redis.call('HMGET', k, 'tenant', 'state', 'reason', 'worker', 'rq')\n"
    "if not r[1] or r[1] ~= ARGV[2] then return {0} end\n"
    "if r[2] == 'paused' and (f.op == 'info' or f.op == 'pause') then\n"
    "  return {4, cjson.encode({state = 'paused', paused_ms = tonumber(redis.call('HGET', k, "
    "'paused_ms')),\n"
    "    paused_until_ms = tonumber(redis.call('HGET', k, 'paused_until')),\n"
    "    snapshot_bytes = tonumber(redis.call('HGET', k, 'snapshot_bytes'))})}\n"
    "end\n"
    "if r[2] == 'paused' or r[2] == 'resuming' then\n"
    "  local q = '" AL_KEY_PREFIX "sq:' .. ARGV[1]\n"
    "  redis.call('RPUSH', q, ARGV[3])\n"
    "  redis.call('PEXPIRE', q, 86400000)\n"
    "  if r[2] == 'paused' then redis.call('RPUSH', r[5], ARGV[1]) end\n"
    "  return {1}\n"
    "end\n"
    "if r[2] ~= 'open' then return {2, r[3] or ''} end\n"
    "local q = '" AL_KEY_PREFIX "wq:' .. r[4]\n"
    "redis.call('RPUSH', q, ARGV[3])\n"
    "redis.call('PEXPIRE', q, 86400000)\n"
    "return {1}\n";

const char al_lua_session_reply[] =
    END_OUT "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end\n"
	    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
	    "end_out(KEYS[2], ARGV[3], 1, ARGV[2])\n"
	    "return 1\n";

const char al_lua_session_renew[] =
    "local t = redis.call('TIME')\n"
    "local lease = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])\n"
    "local gone = {}\n"
    "for i = 3, #ARGV do\n"
    "  local k = '" AL_KEY_PREFIX "sess:' .. ARGV[i]\n"
    "  local r = redis.call('HMGET', k, 'worker', 'state')\n"
    "  if r[1] == ARGV[1] and (r[2] == 'open' or r[2] == 'resuming') then\n"
    "    redis.call('HSET', k, 'lease_ms', lease)\n"
    "    redis.call('ZADD', KEYS[1], lease, ARGV[i])\n"
    "  else gone[#gone + 1] = ARGV[i] end\n"
    "end\n"
    "return gone\n";

const char al_lua_session_end[] =
    SESSION_END_ONE "return end_one(KEYS[1], ARGV[4], ARGV[1], ARGV[2], ARGV[3])\n";

const char al_lua_session_lost[] = SESSION_END_ONE
    "local n = 0\n"
    "for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, "
    "64)) do\n"
    "  local k = '" AL_KEY_PREFIX "sess:' .. sid\n"
    "  local r = redis.call('HMGET', k, 'state', 'rq')\n"
    "  if r[1] == 'resuming' then\n"
    "    redis.call('HSET', k, 'state', 'paused')\n"
    "    redis.call('ZREM', KEYS[1], sid)\n"
    "    if redis.call('LLEN', '" AL_KEY_PREFIX "sq:' .. sid) > 0 then\n"
    "      redis.call('RPUSH', r[2], sid)\n"
    "    end\n"
    "    n = n + 1\n"
    "  elseif end_one(k, sid, 'worker_lost', ARGV[1], ARGV[2]) == 0 then\n"
    "    redis.call('ZREM', KEYS[1], sid)\n"
    "  else n = n + 1 end\n"
    "end\n"
    "return n\n";

/* ---- paused sessions (docs/snapshots.md) ---- */

/* HSET k with ARGV's n field/value pairs from index i on; the index after. */
#define SET_PAIRS                                                                                  \
	"local function set_pairs(k, i)\n"                                                         \
	"  local n = tonumber(ARGV[i])\n"                                                          \
	"  for j = 1, n do redis.call('HSET', k, ARGV[i + 2 * j - 1], ARGV[i + 2 * j]) end\n"      \
	"  return i + 2 * n + 1\n"                                                                 \
	"end\n"

const char al_lua_session_pause[] = NOW_MS SET_PAIRS
    "local r = redis.call('HMGET', KEYS[1], 'worker', 'state')\n"
    "if r[1] ~= ARGV[1] or r[2] ~= 'open' then return {-1, 0} end\n"
    "local n = tonumber(redis.call('HGET', KEYS[2], 'paused') or '0')\n"
    "if n >= tonumber(ARGV[2]) then return {0, n} end\n"
    "redis.call('HINCRBY', KEYS[2], 'paused', 1)\n"
    "if tonumber(redis.call('HGET', KEYS[2], 'sessions') or '0') > 0 then\n"
    "  redis.call('HINCRBY', KEYS[2], 'sessions', -1)\n"
    "end\n"
    "local until_ms = now + tonumber(ARGV[3])\n"
    "redis.call('HSET', KEYS[1], 'state', 'paused', 'paused_ms', now, 'paused_until', until_ms,\n"
    "  'rq', ARGV[4])\n"
    "local i = set_pairs(KEYS[1], 6)\n"
    "redis.call('ZREM', KEYS[3], ARGV[5])\n"
    "redis.call('ZADD', KEYS[4], until_ms, ARGV[5])\n"
    "if i <= #ARGV then\n"
    "  local q = '" AL_KEY_PREFIX "sq:' .. ARGV[5]\n"
    "  for j = i, #ARGV do redis.call('RPUSH', q, ARGV[j]) end\n"
    "  redis.call('PEXPIRE', q, 86400000)\n"
    "  redis.call('RPUSH', ARGV[4], ARGV[5])\n"
    "end\n"
    "return {1, n + 1}\n";

const char al_lua_session_fork[] = NOW_MS SET_PAIRS
    "local r = redis.call('HMGET', KEYS[1], 'worker', 'state', 'tenant', 'tier')\n"
    "if r[1] ~= ARGV[1] or r[2] ~= 'open' then return {-1, 0} end\n"
    "local c = tonumber(ARGV[5])\n"
    "local n = tonumber(redis.call('HGET', KEYS[2], 'paused') or '0')\n"
    "if n + c > tonumber(ARGV[2]) then return {0, n} end\n"
    "local until_ms = now + tonumber(ARGV[3])\n"
    "for j = 1, c do\n"
    "  local id, path = ARGV[4 + 2 * j], ARGV[5 + 2 * j]\n"
    "  local k = '" AL_KEY_PREFIX "sess:' .. id\n"
    "  if redis.call('EXISTS', k) == 1 then return {-2, 0} end\n"
    "  redis.call('HSET', k, 'tenant', r[3], 'tier', r[4], 'worker', ARGV[1], 'state', 'paused',\n"
    "    'opened_ms', now, 'paused_ms', now, 'paused_until', until_ms, 'rq', ARGV[4],\n"
    "    'snapshot', path, 'parent', ARGV[6 + 2 * c])\n"
    "  set_pairs(k, 7 + 2 * c)\n"
    "  redis.call('ZADD', KEYS[3], until_ms, id)\n"
    "end\n"
    "redis.call('HINCRBY', KEYS[2], 'paused', c)\n"
    "return {1, n + c}\n";

const char al_lua_session_take[] =
    NOW_MS "if redis.call('HGET', KEYS[1], 'state') ~= 'paused' then return {0} end\n"
	   "redis.call('HSET', KEYS[1], 'state', 'resuming', 'worker', ARGV[1], 'lease_ms',\n"
	   "  now + tonumber(ARGV[2]))\n"
	   "redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])\n"
	   "return {1, redis.call('HGETALL', KEYS[1]),\n"
	   "  redis.call('LRANGE', '" AL_KEY_PREFIX "sq:' .. ARGV[3], 0, -1)}\n";

const char al_lua_session_resumed[] =
    "local r = redis.call('HMGET', KEYS[1], 'worker', 'state')\n"
    "if r[1] ~= ARGV[1] or r[2] ~= 'resuming' then return {0, 0} end\n"
    "redis.call('HSET', KEYS[1], 'state', 'open')\n"
    "redis.call('HINCRBY', KEYS[1], 'resumes', 1)\n"
    "redis.call('HDEL', KEYS[1], 'snapshot', 'snapshot_bytes', 'snapshot_sha256', 'job',\n"
    "  'paused_ms', 'paused_until', 'rq', 'seen')\n"
    "if tonumber(redis.call('HGET', KEYS[2], 'paused') or '0') > 0 then\n"
    "  redis.call('HINCRBY', KEYS[2], 'paused', -1)\n"
    "end\n"
    "local open = redis.call('HINCRBY', KEYS[2], 'sessions', 1)\n"
    "redis.call('ZREM', KEYS[3], ARGV[2])\n"
    "local q = '" AL_KEY_PREFIX "sq:' .. ARGV[2]\n"
    "local wq = '" AL_KEY_PREFIX "wq:' .. ARGV[1]\n"
    "local moved = 0\n"
    "while true do\n"
    "  local c = redis.call('LPOP', q)\n"
    "  if not c then break end\n"
    "  redis.call('RPUSH', wq, c)\n"
    "  moved = moved + 1\n"
    "end\n"
    "if moved > 0 then redis.call('PEXPIRE', wq, 86400000) end\n"
    "return {1, open}\n";

const char al_lua_session_drop[] =
    SESSION_END_ONE NOW_MS "local path = redis.call('HGET', KEYS[1], 'snapshot') or ''\n"
			   "local st = redis.call('HGET', KEYS[1], 'state')\n"
			   "if st ~= 'paused' and st ~= 'resuming' then return {0, ''} end\n"
			   "end_one(KEYS[1], ARGV[3], ARGV[1], now, ARGV[2])\n"
			   "local q = '" AL_KEY_PREFIX "sq:' .. ARGV[3]\n"
			   "local out = {1, path}\n"
			   "for _, c in ipairs(redis.call('LRANGE', q, tonumber(ARGV[4]), -1)) do\n"
			   "  out[#out + 1] = c\n"
			   "end\n"
			   "redis.call('DEL', q)\n"
			   "return out\n";

const char al_lua_paused_due[] = SESSION_END_ONE NOW_MS
    "local mine, waiting = {}, 0\n"
    "for i = 2, #ARGV do\n"
    "  mine[ARGV[i]] = true\n"
    "  waiting = waiting + redis.call('LLEN', ARGV[i])\n"
    "end\n"
    "local out = {waiting}\n"
    "for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 32)) "
    "do\n"
    "  local k = '" AL_KEY_PREFIX "sess:' .. sid\n"
    "  local r = redis.call('HMGET', k, 'state', 'rq', 'snapshot')\n"
    "  if r[1] ~= 'paused' then redis.call('ZREM', KEYS[1], sid)\n"
    "  elseif mine[r[2]] then\n"
    "    end_one(k, sid, 'paused_expired', now, ARGV[1])\n"
    "    out[#out + 1] = sid\n"
    "    out[#out + 1] = r[3] or ''\n"
    "  end\n"
    "end\n"
    "return out\n";

const char al_lua_paused_expire[] = SESSION_END_ONE NOW_MS
    "local n = 0\n"
    "for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]),\n"
    "    'LIMIT', 0, 64)) do\n"
    "  local k = '" AL_KEY_PREFIX "sess:' .. sid\n"
    "  local st = redis.call('HGET', k, 'state')\n"
    "  if st == 'paused' then\n"
    "    end_one(k, sid, 'paused_expired', now, ARGV[2])\n"
    "    n = n + 1\n"
    "  elseif st ~= 'resuming' then redis.call('ZREM', KEYS[1], sid) end\n"
    "end\n"
    "return n\n";

const char *const al_lua_all[] = {
    al_lua_submit,
    al_lua_lookup,
    al_lua_admit,
    al_lua_claim,
    al_lua_fetch,
    al_lua_commit,
    al_lua_commit_fetch,
    al_lua_reject,
    al_lua_retry,
    al_lua_promote,
    al_lua_reclaim,
    al_lua_cancel,
    al_lua_expire,
    al_lua_trim,
    al_lua_await,
    al_lua_give_back,
    al_lua_workers,
    al_lua_vm_end_due,
    al_lua_vm_end_one,
    al_lua_session_open,
    al_lua_session_call,
    al_lua_session_reply,
    al_lua_session_renew,
    al_lua_session_end,
    al_lua_session_lost,
    al_lua_session_pause,
    al_lua_session_fork,
    al_lua_session_take,
    al_lua_session_resumed,
    al_lua_session_drop,
    al_lua_paused_due,
    al_lua_paused_expire,
    NULL,
};

bool al_script_read_only(const char *script)
{
	return script == al_lua_lookup || script == al_lua_workers || script == al_lua_await;
}

const char *al_script_sha(const char *script)
{
	static struct {
		const char *script;
		char hex[41];
	} cache[48];

	for (size_t i = 0; i < sizeof(cache) / sizeof(cache[0]); i++) {
		unsigned char md[SHA_DIGEST_LENGTH];

		if (cache[i].script == script)
			return cache[i].hex;
		if (cache[i].script)
			continue;
		SHA1((const unsigned char *)script, strlen(script), md);
		for (int k = 0; k < SHA_DIGEST_LENGTH; k++)
			snprintf(cache[i].hex + 2 * k, 3, "%02x", md[k]);
		cache[i].script = script;
		return cache[i].hex;
	}
	return "0000000000000000000000000000000000000000"; /* more than 48 scripts: a bug */
}
