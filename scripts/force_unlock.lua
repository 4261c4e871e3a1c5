-- force_unlock: delete a lock whatever its token (an operator's override).
-- KEYS[1]  the lock key
-- ARGV[1]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[2]  the notice channel of the lock's hash slot (an argument, as in
--          release.lua)
-- Returns {1, 'string'} deleted; {0, 'none'} the key does not exist;
--         {-1, type} the key holds data that dlock did not write (left untouched).
--#include announce
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {0, kind}
end
if kind ~= 'string' or redis.call('STRLEN', KEYS[1]) ~= 36 then
  return {-1, kind}
end
local v = redis.call('GET', KEYS[1])
if not string.match(v, '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$') then
  return {-1, kind}
end
redis.call('DEL', KEYS[1])
announce(ARGV[1], ARGV[2], KEYS[1])
return {1, kind}
