-- redisson_force_unlock: Redisson's RLock forceUnlock (RedissonLock.forceUnlockAsync:
-- DEL the hash, and publish "0" on its channel when it existed), refusing
-- data that is not a lock hash.
-- KEYS[1]  the lock hash
-- ARGV[1]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[2]  Redisson's channel: redisson_lock__channel:{name}
-- Returns {1, 'hash'} deleted; {0, 'none'} no such key;
--         {-1, type} the key is not a hash (left untouched).
--#include announce
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {0, kind}
end
if kind ~= 'hash' then
  return {-1, kind}
end
redis.call('DEL', KEYS[1])
announce(ARGV[1], ARGV[2], '0')
return {1, kind}
