-- redisson_latch_set: TrySetCount of a CountDownLatch on a Client
-- WithRedissonCompat. Follows RedissonCountDownLatch.java, trySetCountAsync:
-- set the count only if the key does not exist, and publish
-- CountDownLatchPubSub.NEW_COUNT_MESSAGE (1) on Redisson's channel.
-- KEYS[1]  the latch: a string holding its count
-- ARGV[1]  the count (> 0)
-- ARGV[2]  how to publish: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  Redisson's channel "redisson_countdownlatch__channel__{<name>}"
-- Returns 1 set; 0 the key exists (unchanged: also when it holds 0 or less,
--           as in Redisson, which checks EXISTS only);
--         an error "WRONGTYPE dlock: <type>" when the key holds data that is
--           no latch count: such a key is never modified (Redisson answers 0).
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
announce(ARGV[2], ARGV[3], 1)
return 1
