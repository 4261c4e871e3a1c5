-- rw_withdraw: a writer that stops waiting (its wait ran out, its context
-- ended) deletes its intent, so new readers need not wait for it to expire,
-- and announces it so that waiting readers try again.
-- KEYS[1]  the intent key: a string holding a waiting writer's token
-- ARGV[1]  the writer's token
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  the notice channel of the key's hash slot
-- ARGV[4]  the notice: the lock's name
-- Returns 1 deleted (and announced); 0 the intent is gone or another
--         writer's (left alone).
--#include announce
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if string.find(v['err'], 'WRONGTYPE', 1, true) then
    return 0
  end
  return v
end
if v ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
announce(ARGV[2], ARGV[3], ARGV[4])
return 1
