-- latch_set: set a count-down latch's count only if it is not set (the key
-- is absent, or holds 0 or less): Redisson's trySetCount.
-- KEYS[1]  the latch: a string holding its count (Redisson's layout)
-- ARGV[1]  the count (> 0)
-- Returns 1 set; 0 the latch is set already (unchanged);
--         an error "WRONGTYPE dlock: <type>" when the key holds data dlock did
--           not write (<type> is 'string' for a string that is no integer):
--           such a key is never modified.
--#include counter
local v, bad = counter(KEYS[1])
if bad then
  return bad
end
if v then
  if tonumber(v) > 0 then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
