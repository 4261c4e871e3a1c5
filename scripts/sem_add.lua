-- sem_add: add permits to a semaphore (a release, or addPermits with any
-- sign), and announce a positive change so that waiters look again.
-- KEYS[1]  the semaphore's permit count: a string holding an integer (the
--          available permits of a Semaphore, the total permits of an
--          ExpirableSemaphore); created when absent
-- ARGV[1]  the permits to add (may be negative or 0)
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  the notice channel of the key's hash slot (the message is KEYS[1],
--          the semaphore's name)
-- Returns the new count;
--         an error "WRONGTYPE dlock: <type>" when the key holds data dlock did
--           not write: such a key is never modified.
--#include counter
--#include announce
local v, bad = counter(KEYS[1])
if bad then
  return bad
end
local n = tonumber(ARGV[1])
local count = redis.call('INCRBY', KEYS[1], n)
-- The notice is a hint: a refused publish must not fail a done release.
if n > 0 then
  announce(ARGV[2], ARGV[3], KEYS[1])
end
return count
