-- redisson_fair_acquire: Redisson's RFairLock acquire, WithRedissonCompat
-- (RedissonFairLock.tryLockInnerAsync: the EVAL_LONG script when queueing,
-- the EVAL_NULL_BOOLEAN script for a single attempt), plus RFencedLock's
-- fencing counter (RedissonFencedLock.tryLockInnerAsync: INCR on every grant).
-- The bodies are Redisson's, statement for statement; only the arguments are
-- in one order for both variants and a grant answers with its token.
-- KEYS[1]  the lock: a hash at the lock's name, field <clientID>:<owner> =
--          hold count (Redisson's RLock layout)
-- KEYS[2]  the queue: redisson_lock_queue:{name}, a list of owner fields
-- KEYS[3]  the timeouts: redisson_lock_timeout:{name}, a sorted set, score =
--          the client-clock ms after which the waiter counts as gone
-- KEYS[4]  the fencing counter: redisson_lock_token:{name} (RFencedLock's)
-- ARGV[1]  the lease in ms (Redisson's internalLockLeaseTime)
-- ARGV[2]  the owner field <clientID>:<owner> (Redisson's getLockName)
-- ARGV[3]  the wait in ms (Redisson's threadWaitTime, or tryLock's waitTime)
-- ARGV[4]  the client's clock in ms (Redisson's System.currentTimeMillis())
-- ARGV[5]  '1' queue up when the lock is not ours to take (EVAL_LONG);
--          '0' a single attempt that does not queue (EVAL_NULL_BOOLEAN)
-- Returns {1, token, count} when granted (Redisson's nil): token is the INCR
--           of KEYS[4], count the owner's hold count after the grant;
--         {0, ttl, next} when not: ttl is Redisson's answer (the lock's
--           PTTL, or, when queued behind others, the approximate ms until the
--           waiter ahead times out; may be negative); next is 1 when the
--           caller is now first in line and the lock is free (Redisson's
--           second loop drops the live heads of a free lock), else 0;
--         {0, -1} for a single attempt;
--         an error "WRONGTYPE dlock: <type>" when KEYS[1] holds no hash.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE dlock: ' .. kind)
end
local wait = tonumber(ARGV[3])
local now = tonumber(ARGV[4])

local function grant(count)
  local token = redis.call('INCR', KEYS[4])
  return {1, token, count}
end

-- remove stale threads
while true do
  local firstThreadId2 = redis.call('LINDEX', KEYS[2], 0)
  if firstThreadId2 == false then
    break
  end
  local timeout = tonumber(redis.call('ZSCORE', KEYS[3], firstThreadId2))
  -- (Redisson fails on a head without a timeout; it is stale here)
  if timeout == nil or timeout <= now then
    -- remove the item from the queue and timeout set
    -- NOTE we do not alter any other timeout
    redis.call('ZREM', KEYS[3], firstThreadId2)
    redis.call('LPOP', KEYS[2])
  else
    break
  end
end

-- check if the lock can be acquired now
if (redis.call('EXISTS', KEYS[1]) == 0)
    and ((redis.call('EXISTS', KEYS[2]) == 0)
      or (redis.call('LINDEX', KEYS[2], 0) == ARGV[2])) then
  -- remove this thread from the queue and timeout set
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
  -- decrease timeouts for all waiting in the queue
  local keys = redis.call('ZRANGE', KEYS[3], 0, -1)
  for i = 1, #keys, 1 do
    redis.call('ZINCRBY', KEYS[3], -wait, keys[i])
  end
  -- acquire the lock and set the TTL for the lease
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return grant(1)
end

-- check if the lock is already held, and this is a re-entry
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  local count = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return grant(count)
end

-- next tells the caller (not Redisson's answer) that it is first in line and
-- the lock is free: its next attempt is granted, so it should come at once.
local function next()
  if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('LINDEX', KEYS[2], 0) == ARGV[2] then
    return 1
  end
  return 0
end

if ARGV[5] ~= '1' then
  return {0, -1}
end

-- check if the lock is not held, and other queues are not used
while true do
  local firstThreadId = redis.call('LINDEX', KEYS[2], 0)
  if (firstThreadId == false) or (firstThreadId == ARGV[2]) then
    break
  end
  local timeout = tonumber(redis.call('ZSCORE', KEYS[3], firstThreadId))
  if (timeout ~= nil and timeout > now) and (redis.call('EXISTS', KEYS[1]) == 0) then
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], firstThreadId)
  else
    break
  end
end

-- the lock cannot be acquired
-- check if the thread is already in the queue
local timeout = redis.call('ZSCORE', KEYS[3], ARGV[2])
if timeout ~= false then
  -- the real timeout is the timeout of the prior thread in the queue, but
  -- this is approximately correct, and avoids having to traverse the queue
  return {0, tonumber(timeout) - wait - now, next()}
end

-- add the thread to the queue at the end, and set its timeout in the timeout
-- set to the timeout of the prior thread in the queue (or the timeout of the
-- lock if the queue is empty) plus the threadWaitTime
local lastThreadId = redis.call('LINDEX', KEYS[2], -1)
local ttl
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
  ttl = tonumber(redis.call('ZSCORE', KEYS[3], lastThreadId)) - now
else
  ttl = redis.call('PTTL', KEYS[1])
end
timeout = ttl + wait + now
if redis.call('ZADD', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
end
return {0, ttl, next()}
