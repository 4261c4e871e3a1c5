-- redisson_latch_count_down: CountDown of a CountDownLatch on a Client
-- WithRedissonCompat. Follows RedissonCountDownLatch.java, countDownAsync:
-- DECR; at 0 or below delete the key; at exactly 0 publish
-- CountDownLatchPubSub.ZERO_COUNT_MESSAGE (0) on Redisson's channel. Below
-- zero (the key held 0 or less) the key is deleted without a message, as in
-- Redisson. An absent key is left absent (Redisson's DECR makes -1 and
-- deletes it at once: the same state, and no message either).
-- KEYS[1]  the latch: a string holding its count
-- ARGV[1]  how to publish: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[2]  Redisson's channel "redisson_countdownlatch__channel__{<name>}"
-- Returns the count left: 0 when the latch opened (or was not set), below 0
--           when the key held 0 or less (it is deleted);
--         an error "WRONGTYPE dlock: <type>" when the key holds data that is
--           no latch count: such a key is never modified.
--#include counter
--#include announce
local v, bad = counter(KEYS[1])
if bad then
  return bad
end
if not v then
  return 0
end
local count = redis.call('DECRBY', KEYS[1], 1)
if count > 0 then
  return count
end
redis.call('DEL', KEYS[1])
-- The message is a hint: a refused publish must not fail a done count-down.
if count == 0 then
  announce(ARGV[1], ARGV[2], 0)
end
return count
