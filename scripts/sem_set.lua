-- sem_set: set a semaphore's permits only if they were never set
-- (Redisson's trySetPermits), and announce them.
-- KEYS[1]  the semaphore's permit count: a string holding an integer
-- ARGV[1]  the permits (>= 0)
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  the notice channel of the key's hash slot (the message is KEYS[1])
-- Returns 1 set; 0 the key exists already (unchanged);
--         an error "WRONGTYPE dlock: <type>" when the key holds data dlock did
--           not write: such a key is never modified.
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
if tonumber(ARGV[1]) > 0 then
  announce(ARGV[2], ARGV[3], KEYS[1])
end
return 1
