-- latch_count_down: count a latch down by one; at zero delete it and announce
-- it, so that its waiters go.
-- KEYS[1]  the latch: a string holding its count
-- ARGV[1]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[2]  the notice channel of the key's hash slot (the message is KEYS[1],
--          the latch's name)
-- Returns the count left (0 when the latch opened, or was not set: counting
--           down a latch that is not set changes nothing);
--         an error "WRONGTYPE dlock: <type>" when the key holds data dlock did
--           not write: such a key is never modified.
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
-- The notice is a hint: a refused publish must not fail a done count-down.
announce(ARGV[1], ARGV[2], KEYS[1])
return 0
