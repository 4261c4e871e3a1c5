-- redisson_fair_release: Redisson's RFairLock unlock, WithRedissonCompat
-- (RedissonFairLock.unlockInnerAsync: drop the stale heads of the queue,
-- count the owner's field down, at zero delete the hash and publish
-- LockPubSub.UNLOCK_MESSAGE "0" on redisson_lock__channel:{name}:<the owner
-- field of the first waiter in line>, the channel that waiter subscribed to).
-- KEYS[1]  the lock hash (the lock's name)
-- KEYS[2]  the queue redisson_lock_queue:{name}               } optional:
-- KEYS[3]  the timeouts redisson_lock_timeout:{name}          } see below
-- ARGV[1]  the owner field <clientID>:<owner>
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  unused (the channel is Redisson's, derived from KEYS[1] below)
-- ARGV[4]  with the queue keys: the client's clock in ms (Redisson's
--          System.currentTimeMillis(), for the stale heads); alone (the
--          watchdog's background release): the notice, unused
-- ARGV[5]  the lease in ms: count down by one (a reentrant Unlock); absent:
--          the hold is over, the owner's field goes whatever its count
-- Without the queue keys (the ownership contract of ownership.go: the
-- watchdog's background release passes KEYS[1] alone) the queue and timeout
-- keys are derived from KEYS[1] as Redisson's prefixName does: they share its
-- hash slot, and the server's clock stands for the client's.
-- Returns 1 released (the field removed; the next waiter told when the lock
--         is free); 2 counted down, still held; 0 the key is gone (the next
--         waiter told, as Redisson does); -1 the hash has no such owner;
--         -2 the key is not a hash.
--#include announce
local function prefixName(prefix, name)
  if string.find(name, '{', 1, true) then
    return prefix .. ':' .. name
  end
  return prefix .. ':{' .. name .. '}'
end
local queue, timeouts, now = KEYS[2], KEYS[3], tonumber(ARGV[4])
if #KEYS < 3 then
  queue = prefixName('redisson_lock_queue', KEYS[1])
  timeouts = prefixName('redisson_lock_timeout', KEYS[1])
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- remove stale threads
while true do
  local firstThreadId2 = redis.call('LINDEX', queue, 0)
  if firstThreadId2 == false then
    break
  end
  local timeout = tonumber(redis.call('ZSCORE', timeouts, firstThreadId2))
  if timeout == nil or timeout <= now then
    redis.call('ZREM', timeouts, firstThreadId2)
    redis.call('LPOP', queue)
  else
    break
  end
end

-- tell the first waiter in line, on the channel of its own
local function notify()
  local nextThreadId = redis.call('LINDEX', queue, 0)
  if nextThreadId ~= false then
    local channel = prefixName('redisson_lock__channel', KEYS[1]) .. ':' .. nextThreadId
    -- The message is a hint: a refused publish must not turn a done release
    -- into an error.
    announce(ARGV[2], channel, '0')
  end
end

local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  notify()
  return 0
end
if kind ~= 'hash' then
  return -2
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if ARGV[5] then
  local counter = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  if counter > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[5])
    return 2
  end
end
-- Redisson DELs the hash when the count reaches zero; the owner's field is
-- its only one, so removing the field deletes the hash alike.
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  notify()
end
return 1
