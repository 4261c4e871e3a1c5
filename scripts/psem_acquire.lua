-- psem_acquire: take one permit of an expirable semaphore, with a lease.
-- KEYS[1]  the semaphore: a string holding the total number of permits;
--          absent counts as 0
-- KEYS[2]  the permits taken: a sorted set, member = a permit's id (a fresh
--          UUID v4), score = its expiry in server milliseconds (TIME); the
--          layout member_renew and member_release renew and release
-- KEYS[3]  the fencing counter of the semaphore's hash slot: dlock:fence:{T}
-- ARGV[1]  the new permit's id
-- ARGV[2]  the lease in milliseconds
-- Returns {1, fencing token (> 0), permits still free} when taken, also
--           when ARGV[1] is taken already (a call the client retried after a
--           lost reply): its lease starts again;
--         {0, ms} when every permit is taken: ms is how long until the
--           earliest lease ends, or -1 when no permit is taken (the
--           semaphore has no permits);
--         an error "WRONGTYPE dlock: <type>" when KEYS[1] holds data dlock
--           did not write (<type> is 'string' for a string that is no
--           integer): such a key is never modified.
-- Expired permits are removed first: a lease that ran out gives its permit
-- back to the pool.
--#include fence
--#include counter

local total = 0

local function granted()
  local f = fence(KEYS[3])
  if type(f) == 'table' then
    -- The counter is unusable: undo the grant rather than leave a permit without a token.
    redis.call('ZREM', KEYS[2], ARGV[1])
    return redis.error_reply('dlock: fencing counter ' .. KEYS[3] .. ': ' .. f['err'])
  end
  return {1, f, total - redis.call('ZCARD', KEYS[2])}
end

local v, bad = counter(KEYS[1])
if bad then
  return bad
end
if v then
  total = tonumber(v)
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
local purged = redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if type(purged) == 'table' and purged['err'] then
  return redis.error_reply('ERR dlock: key ' .. KEYS[2] .. ' of the semaphore holds a ' ..
    redis.call('TYPE', KEYS[2])['ok'] .. ', not its permits')
end

local function take()
  redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
  if redis.call('PTTL', KEYS[2]) < lease then
    redis.call('PEXPIRE', KEYS[2], lease)
  end
  return granted()
end

if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return take()
end
if redis.call('ZCARD', KEYS[2]) < total then
  return take()
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #first == 0 then
  return {0, -1}
end
return {0, tonumber(first[2]) - now}
