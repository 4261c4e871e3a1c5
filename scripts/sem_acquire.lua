-- sem_acquire: take permits of a semaphore if enough are available.
-- KEYS[1]  the semaphore: a string holding the number of available permits
--          (Redisson's RSemaphore layout); absent counts as 0
-- ARGV[1]  how many permits to take (> 0)
-- Returns {1, permits left} when taken (DECRBY);
--         {0, permits available} when too few are;
--         an error "WRONGTYPE dlock: <type>" when the key holds data dlock did
--           not write (<type> is 'string' for a string that is no integer):
--           such a key is never modified.
--#include counter
local v, bad = counter(KEYS[1])
if bad then
  return bad
end
if not v then
  return {0, 0}
end
local n = tonumber(ARGV[1])
local available = tonumber(v)
if available < n then
  return {0, available}
end
return {1, redis.call('DECRBY', KEYS[1], n)}
