-- release: delete the lock only if it still holds our token.
-- KEYS[1]  the lock key
-- ARGV[1]  the token of our hold
-- Returns 1 deleted; 0 the key is gone (the lease ran out);
--         -1 another token holds it; -2 the key holds another Redis type.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  return -2
end
if not v then
  return 0
end
if v ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
