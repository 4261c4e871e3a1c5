-- redisson_rw_read_release: release a read lock in Redisson's layout. It
-- follows RedissonReadLock.unlockInnerAsync (Redisson 3.x) without its
-- unlock latch (redisson_unlock_latch:{name}:<requestId>, Redisson's guard
-- against running a retried unlock twice): count the owner's field down,
-- delete its highest rwlock_timeout key, and while other fields remain keep
-- the hash alive for the longest remaining timeout key; otherwise DEL the
-- hash and publish UNLOCK_MESSAGE "0" on redisson_rwlock:{name}.
-- KEYS[1]  the lock hash
-- ARGV[1]  the owner's read field "<clientID>:<ownerID>"
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  unused (the channel is Redisson's, derived from KEYS[1] below)
-- ARGV[4]  unused (the message is Redisson's "0")
-- ARGV[5]  present (the lease in ms): count down by one (a reentrant
--          RUnlock); absent: the hold is over, remove the owner's field and
--          its timeout keys whatever its count (Unlock of the last hold, a
--          background release)
-- Returns 1 released (the owner's field is gone); 2 counted down, still
--         held; 0 the hash is gone (also when a count-down found the
--         owner's last timeout key expired and Redisson's rule deleted the
--         hash); -1 the hash has no such owner; -2 not a hash.
-- The timeout keys are not in KEYS: their names depend on the hash's fields,
-- as in Redisson's script; they share the hash's slot ("{name}:...").
--#include announce
local prefix = KEYS[1]
if not string.find(prefix, '{', 1, true) then
  prefix = '{' .. prefix .. '}'
end
local channel = 'redisson_rwlock:' .. prefix

local function publish()
  announce(ARGV[2], channel, '0')
end

local mode = redis.pcall('HGET', KEYS[1], 'mode')
if type(mode) == 'table' then
  if string.find(mode['err'], 'WRONGTYPE', 1, true) then
    return -2
  end
  return mode
end
if mode == false then
  publish() -- as Redisson does for an unlock that finds no lock
  return 0
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end

local timeouts = prefix .. ':' .. ARGV[1] .. ':rwlock_timeout'
local countDown = ARGV[5] ~= nil
local counter
if countDown then
  counter = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  if counter == 0 then
    redis.call('HDEL', KEYS[1], ARGV[1])
  end
  redis.call('DEL', timeouts .. ':' .. (counter + 1))
else
  local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0
  redis.call('HDEL', KEYS[1], ARGV[1])
  for i = n, 1, -1 do
    redis.call('DEL', timeouts .. ':' .. i)
  end
  counter = 0
end

local function done()
  if countDown and counter > 0 then
    if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
      return 2
    end
    return 0
  end
  return 1
end

if redis.call('HLEN', KEYS[1]) > 1 then
  local maxRemainTime = -3
  local keys = redis.call('HKEYS', KEYS[1])
  for _, key in ipairs(keys) do
    local c = tonumber(redis.call('HGET', KEYS[1], key))
    if type(c) == 'number' then
      for i = c, 1, -1 do
        local remainTime = redis.call('PTTL', prefix .. ':' .. key .. ':rwlock_timeout:' .. i)
        maxRemainTime = math.max(remainTime, maxRemainTime)
      end
    end
  end
  if maxRemainTime > 0 then
    redis.call('PEXPIRE', KEYS[1], maxRemainTime)
    return done()
  end
  if mode == 'write' then
    return done()
  end
end
redis.call('DEL', KEYS[1])
publish()
return done()
