-- redisson_acquire: Redisson's RLock acquire, for a Client WithRedissonCompat:
-- RedissonLock.tryLockInnerAsync (the hash at the name, HINCRBY of the
-- owner's field, PEXPIRE the lease, PTTL when busy) with the token of
-- RedissonFencedLock.tryLockInnerAsync (INCR redisson_lock_token:{name}).
-- KEYS[1]  the lock: a hash, field "<clientID>:<ownerID>" = the hold count
-- KEYS[2]  the fencing counter redisson_lock_token:{name}
-- ARGV[1]  the owner field
-- ARGV[2]  the lease in milliseconds
-- Returns the fencing token (> 0) when acquired, or re-entered by the same
--           owner (its count goes up by one, as Redisson's does);
--         -1 - pttl (<= 0) when another owner holds the lock;
--         an error "WRONGTYPE dlock: <type>" when the key is not a hash.
-- The token never goes below the server clock in microseconds (fence()):
-- Redisson's own INCR then continues above it, so Java and Go tokens share
-- one increasing sequence.
--#include fence

local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE dlock: ' .. kind)
end
if kind == 'none' or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local f = fence(KEYS[2])
  if type(f) == 'table' then
    return redis.error_reply('dlock: fencing counter ' .. KEYS[2] .. ': ' .. f['err'])
  end
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return f
end
return -1 - redis.call('PTTL', KEYS[1])
