"""The three client scripts of proto/PROTOCOL.md ("The three client scripts"),
word for word: the daemons run the same text. A test checks that these are
the document's (client/python/tests/test_client.py)."""

SUBMIT = r"""local out = {}
for i = 0, #KEYS / 3 - 1 do
  local K, A = 3 * i, 7 * i
  local r
  local prev = ARGV[A + 5] == '1' and redis.call('GET', KEYS[K + 3])
  if prev then r = {0, prev}
  elseif redis.call('EXISTS', KEYS[K + 1]) == 1 then r = {-1, ARGV[A + 1]}
  else
    local e = redis.call('XADD', KEYS[K + 2], '*', 'id', ARGV[A + 1], 'job', ARGV[A + 2])
    redis.call('HSET', KEYS[K + 1], 'state', 'submitted', 'submitted_ms', ARGV[A + 3], 'tier', ARGV[A + 6], 'tenant', ARGV[A + 7], 'entry', e)
    if ARGV[A + 5] == '1' then redis.call('SET', KEYS[K + 3], ARGV[A + 1], 'EX', ARGV[A + 4]) end
    r = {1, ARGV[A + 1]}
  end
  out[i + 1] = r
end
return out"""

REARM = r"""local t = redis.call('PTTL', KEYS[2])
if t <= 0 then return 0 end
redis.call('RPUSH', KEYS[1], '1')
redis.call('PEXPIRE', KEYS[1], t)
return 1"""

CANCEL = r"""local function end_out(key, status, attempt, ttl)
  redis.call('XADD', key, 'MAXLEN', '~', '4096', '*', 't', 'end', 's', status, 'a', attempt)
  redis.call('PEXPIRE', key, ttl)
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local h = redis.call('HMGET', KEYS[1], 'state', 'counted', 'tenant')
local st = h[1]
if not st then return -1 end
if st == 'done' then return 0 end
redis.call('HSET', KEYS[1], 'cancel', '1')
if st == 'running' then
  redis.call('PUBLISH', 'al:cancel', ARGV[1])
  return 2
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
if (st == 'queued' or st == 'retrying') and h[2] == '1' then
  redis.call('HINCRBY', 'al:tenant:' .. (h[3] or 'default'), 'queued', -1) end
redis.call('HSET', KEYS[1], 'state', 'done', 'status', 'cancelled')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('RPUSH', KEYS[3], '1')
redis.call('PEXPIRE', KEYS[3], ARGV[3])
end_out(KEYS[4], 'cancelled', '0', ARGV[3])
redis.call('HINCRBY', 'al:stats', 'status:cancelled', 1)
return 1"""
