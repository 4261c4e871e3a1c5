-- redisson_fair_reenter: take a FairMutex held by the handle once more,
-- WithRedissonCompat: the re-entry branch of Redisson's acquire
-- (RedissonFairLock.tryLockInnerAsync: HINCRBY the owner's field, PEXPIRE the
-- lease). Unlike the acquire script, it never queues: a handle that lost its
-- hold must not join the line by re-entering.
-- KEYS[1]  the lock hash (the lock's name)
-- ARGV[1]  the owner field <clientID>:<owner>
-- ARGV[2]  the lease in milliseconds
-- Returns 1 counted up and extended; 0 the key is gone; -1 the hash has no
--         such owner; -2 the key is not a hash.
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
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
