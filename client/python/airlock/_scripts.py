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

SESSION_CALL = r"""local function mp_fields(b)
  local p = 1
  local function u(n)
    if p + n - 1 > #b then error('short') end
    local v = 0
    for i = p, p + n - 1 do v = v * 256 + string.byte(b, i) end
    p = p + n
    return v
  end
  local fixed = {[0xca] = 4, [0xcb] = 8, [0xcc] = 1, [0xcd] = 2, [0xce] = 4, [0xcf] = 8,
    [0xd0] = 1, [0xd1] = 2, [0xd2] = 4, [0xd3] = 8, [0xd4] = 2, [0xd5] = 3, [0xd6] = 5,
    [0xd7] = 9, [0xd8] = 17}
  local sized = {[0xd9] = {'s', 1}, [0xda] = {'s', 2}, [0xdb] = {'s', 4},
    [0xc4] = {'b', 1}, [0xc5] = {'b', 2}, [0xc6] = {'b', 4}, [0xdc] = {'a', 2},
    [0xdd] = {'a', 4}, [0xde] = {'m', 2}, [0xdf] = {'m', 4}}
  local function head()
    local t = u(1)
    if t < 0x80 or t >= 0xe0 or t == 0xc0 or t == 0xc2 or t == 0xc3 then return 'x', 0 end
    if t < 0x90 then return 'm', t - 0x80 end
    if t < 0xa0 then return 'a', t - 0x90 end
    if t < 0xc0 then return 's', t - 0xa0 end
    if fixed[t] then return 'b', fixed[t] end
    if t >= 0xc7 and t <= 0xc9 then return 'b', u(2 ^ (t - 0xc7)) + 1 end
    if sized[t] then return sized[t][1], u(sized[t][2]) end
    error('bad')
  end
  local function body(k, n)
    if k == 'm' then n = 2 * n elseif k ~= 'a' then p = p + n; n = 0 end
    while n > 0 do
      local k2, n2 = head()
      if k2 == 'a' then n = n + n2 elseif k2 == 'm' then n = n + 2 * n2
      elseif k2 ~= 'x' then p = p + n2 end
      n = n - 1
    end
    if p > #b + 1 then error('short') end
  end
  local k, n = head()
  if k ~= 'm' then error('not a map') end
  local got = {}
  for _ = 1, n do
    local kk, kn = head()
    local key = kk == 's' and string.sub(b, p, p + kn - 1)
    body(kk, kn)
    local vk, vn = head()
    if vk == 's' and (key == 'id' or key == 'session' or key == 'tenant' or key == 'op') then
      got[key] = string.sub(b, p, p + vn - 1)
    elseif key then got[key] = false end
    body(vk, vn)
  end
  if p ~= #b + 1 then error('trailing bytes') end
  return got
end
local ok, f = pcall(mp_fields, ARGV[3])
if not ok then return {3, 'the call is not one msgpack map'} end
if f.session ~= ARGV[1] then
  return {3, 'session: the call names another session than it is queued for'}
end
if f.tenant == false or (f.tenant or 'default') ~= ARGV[2] then
  return {3, 'tenant: the call names another tenant than it is queued as'}
end
if not f.id or #f.id > 64 or not string.match(f.id, '^[%w%._:%-]+$') then
  return {3, 'id: expected 1..64 of [A-Za-z0-9._:-]'}
end
local k = 'al:sess:' .. ARGV[1]
local r = redis.call('HMGET', k, 'tenant', 'state', 'reason', 'worker', 'rq')
if not r[1] or r[1] ~= ARGV[2] then return {0} end
if r[2] == 'paused' and (f.op == 'info' or f.op == 'pause') then
  return {4, cjson.encode({state = 'paused', paused_ms = tonumber(redis.call('HGET', k, 'paused_ms')),
    paused_until_ms = tonumber(redis.call('HGET', k, 'paused_until')),
    snapshot_bytes = tonumber(redis.call('HGET', k, 'snapshot_bytes'))})}
end
if r[2] == 'paused' or r[2] == 'resuming' then
  local q = 'al:sq:' .. ARGV[1]
  redis.call('RPUSH', q, ARGV[3])
  redis.call('PEXPIRE', q, 86400000)
  if r[2] == 'paused' then redis.call('RPUSH', r[5], ARGV[1]) end
  return {1}
end
if r[2] ~= 'open' then return {2, r[3] or ''} end
local q = 'al:wq:' .. r[4]
redis.call('RPUSH', q, ARGV[3])
redis.call('PEXPIRE', q, 86400000)
return {1}"""
