-- redisson_renew: Redisson's renewal of a lock hash, one watchdog batch
-- (RedissonBaseLock.renewExpirationAsync: HEXISTS the owner's field, then
-- PEXPIRE), for RLock, RFairLock and the write lock of RReadWriteLock.
-- KEYS[i]    a lock hash
-- ARGV[1]    the lease in milliseconds
-- ARGV[i+1]  the owner field expected in KEYS[i]
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
