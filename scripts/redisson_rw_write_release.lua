-- redisson_rw_write_release: release the write lock in Redisson's layout. It
-- follows RedissonWriteLock.unlockInnerAsync (Redisson 3.x) without its
-- unlock latch (redisson_unlock_latch:{name}:<requestId>, Redisson's guard
-- against running a retried unlock twice): count the owner's write field
-- down (above zero PEXPIRE the lease); at zero HDEL it, and DEL the hash and
-- publish READ_UNLOCK_MESSAGE "1" on redisson_rwlock:{name} when only "mode"
-- is left, else set the mode to "read" (the owner's own read holds remain).
-- KEYS[1]  the lock hash
-- ARGV[1]  the owner's write field "<clientID>:<ownerID>:write"
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  unused (the channel is Redisson's, derived from KEYS[1] below)
-- ARGV[4]  unused (the message is Redisson's "1")
-- ARGV[5]  the lease in ms: count down by one (a reentrant Unlock); absent:
--          the hold is over, remove the owner's field whatever its count
--          (Unlock of the last hold, a background release)
-- Returns 1 released; 2 counted down, still held; 0 the hash is gone;
--         -1 the hash is not in write mode with this owner; -2 not a hash.
--#include announce
local prefix = KEYS[1]
if not string.find(prefix, '{', 1, true) then
  prefix = '{' .. prefix .. '}'
end
local channel = 'redisson_rwlock:' .. prefix

local function publish()
  announce(ARGV[2], channel, '1')
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
if mode ~= 'write' or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if ARGV[5] then
  if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[5])
    return 2
  end
end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HLEN', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[1])
  publish()
else
  redis.call('HSET', KEYS[1], 'mode', 'read')
end
return 1
