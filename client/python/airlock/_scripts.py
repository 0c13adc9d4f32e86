"""The client scripts of proto/PROTOCOL.md ("The client scripts"), word for
word: the daemons run the same text. A test checks that these are the
document's (client/python/tests/test_client.py)."""

SUBMIT = r"""local out = {}
for i = 0, #KEYS / 2 - 1 do
  local K, A = 2 * i, 7 * i
  local id = ARGV[A + 1]
  local r
  local prev = ARGV[A + 5] == '1' and redis.call('GET', KEYS[K + 2])
  if prev then r = {0, prev}
  elseif redis.call('EXISTS', KEYS[K + 1], 'al:job:' .. id) > 0 then r = {-1, id}
  else
    local e = redis.call('XADD', 'al:intake', '*', 'id', id, 'job', ARGV[A + 2])
    redis.call('SET', KEYS[K + 1], e .. ' ' .. ARGV[A + 7] .. ' ' .. ARGV[A + 6], 'EX', ARGV[A + 4])
    if ARGV[A + 5] == '1' then redis.call('SET', KEYS[K + 2], id, 'EX', ARGV[A + 4]) end
    r = {1, id}
  end
  out[i + 1] = r
end
return out"""

LOOKUP = r"""local h = redis.call('HMGET', KEYS[1], 'state', 'tenant')
if h[1] then return h end
local m = redis.call('GET', KEYS[2])
if m then return {'submitted', string.match(m, '^%S+ (%S*)')} end
return {false, false}"""

AWAIT = r"""local r = redis.call('GET', KEYS[1])
if r then return {1, r} end
local e = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
return {0, e[1] and e[1][1] or '0-0'}"""

SESSION_CALL = r"""local r = redis.call('HMGET', 'al:sess:' .. ARGV[1], 'tenant', 'state', 'reason', 'worker')
if not r[1] or r[1] ~= ARGV[2] then return {0} end
if r[2] ~= 'open' then return {2, r[3] or ''} end
local q = 'al:wq:' .. r[4]
redis.call('RPUSH', q, ARGV[3])
redis.call('PEXPIRE', q, 86400000)
return {1}"""
