-- redisson_sem_set: TrySetPermits of a Semaphore on a Client
-- WithRedissonCompat. Follows RedissonSemaphore.java, trySetPermitsAsync:
-- set the permits only if the key is absent, and publish the permits on
-- Redisson's channel so that Java and Go waiters look again.
-- KEYS[1]  the semaphore: a string holding the available permits
-- ARGV[1]  the permits (>= 0)
-- ARGV[2]  how to publish: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  Redisson's channel "redisson_sc:{<name>}" (the message is ARGV[1],
--          the permits set, as Redisson sends it: also when it is 0)
-- Returns 1 set; 0 the key exists already (unchanged);
--         an error "WRONGTYPE dlock: <type>" when the key holds data that is
--           no permit count (<type> is 'string' for a string that is no
--           integer): such a key is never modified (Redisson answers 0).
--#include counter
--#include announce
local v, bad = counter(KEYS[1])
if bad then
  return bad
end
if v then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
-- The message is a hint: a refused publish must not fail a done set.
announce(ARGV[2], ARGV[3], ARGV[1])
return 1
