-- redisson_sem_add: Release and AddPermits of a Semaphore on a Client
-- WithRedissonCompat. Follows RedissonSemaphore.java, releaseAsync ("incrby"
-- then publish the new count) and addPermitsAsync (set get+n, publish the
-- new count; the same outcome as INCRBY on an integer or an absent key):
-- add the permits and publish the permits now available on Redisson's
-- channel, whatever their sign, as Redisson does.
-- KEYS[1]  the semaphore: a string holding the available permits; created
--          when absent
-- ARGV[1]  the permits to add (may be negative or 0)
-- ARGV[2]  how to publish: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  Redisson's channel "redisson_sc:{<name>}" (the message is the new
--          count, in decimal)
-- Returns the new count;
--         an error "WRONGTYPE dlock: <type>" when the key holds data that is
--           no permit count: such a key is never modified.
--#include counter
--#include announce
local v, bad = counter(KEYS[1])
if bad then
  return bad
end
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
-- The message is a hint: a refused publish must not fail a done release.
announce(ARGV[2], ARGV[3], count)
return count
