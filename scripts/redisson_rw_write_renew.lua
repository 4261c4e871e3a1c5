-- redisson_rw_write_renew: renew write locks in Redisson's layout, one
-- watchdog batch. Each key follows RedissonBaseLock.renewExpirationAsync
-- (Redisson 3.x), which RedissonWriteLock.renewExpirationAsync runs first:
-- HEXISTS the owner's write field, then PEXPIRE the hash. (Redisson then
-- tries the read lock's renewal for an owner that downgraded; a dlock handle
-- holds one mode at a time, so it never needs that.)
-- KEYS[i]    a lock hash
-- ARGV[1]    the lease in milliseconds
-- ARGV[i+1]  the owner's write field "<clientID>:<ownerID>:write"
-- Returns an array, one entry per key: 1 extended; 0 the key is gone;
--         -1 the hash has no such owner; -2 the key is not a hash.
local out = {}
for i = 1, #KEYS do
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind == 'none' then
    out[i] = 0
  elseif kind ~= 'hash' then
    out[i] = -2
  elseif redis.call('HEXISTS', KEYS[i], ARGV[i + 1]) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = -1
  end
end
return out
