-- redisson_release: Redisson's RLock unlock (RedissonLock.unlockInnerAsync:
-- HINCRBY the owner's field by -1; above zero PEXPIRE the lease; at zero DEL
-- the hash and publish UNLOCK_MESSAGE "0" on redisson_lock__channel:{name}).
-- KEYS[1]  the lock hash
-- ARGV[1]  the owner field
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  unused (the channel is Redisson's, derived from KEYS[1] below)
-- ARGV[4]  unused (the message is Redisson's "0")
-- ARGV[5]  the lease in ms: count down by one (Unlock); absent: the hold is
--          over, remove the owner whatever its count (a background release)
-- Returns 1 released (deleted, announced); 2 counted down, still held;
--         0 the key is gone; -1 the hash has no such owner; -2 not a hash.
--#include announce
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -2
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if ARGV[5] then
  if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[5])
    return 2
  end
end
redis.call('DEL', KEYS[1])
local channel = 'redisson_lock__channel:{' .. KEYS[1] .. '}'
if string.find(KEYS[1], '{', 1, true) then
  channel = 'redisson_lock__channel:' .. KEYS[1]
end
announce(ARGV[2], channel, '0')
return 1
