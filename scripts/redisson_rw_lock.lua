-- redisson_rw_lock: take the write lock in Redisson's layout (RWMutex.Lock on
-- a Client WithRedissonCompat). It follows RedissonWriteLock.tryLockInnerAsync
-- (Redisson 3.x) step by step, and then takes a fencing token from
-- RFencedLock's counter (RedissonFencedLock: INCR redisson_lock_token:{name}),
-- which RReadWriteLock itself does not have.
-- KEYS[1]  the lock hash (the name): field "mode", owner fields (hold counts)
-- KEYS[2]  unused (the read lock's timeout prefix: the RWMutex passes one
--          list of KEYS to both of its acquire scripts)
-- KEYS[3]  the fencing counter redisson_lock_token:{name}
-- ARGV[1]  the lease in milliseconds
-- ARGV[2]  the owner's write field "<clientID>:<ownerID>:write"
-- ARGV[3]  unused
-- ARGV[4]  '1': count up the write hold the handle has (a reentrant Lock);
--          '0': a new hold
-- Returns for a new hold: the fencing token (> 0) when granted; -1 - PTTL
--           (<= 0) of the hash when busy (readers or another writer);
--         for '1': the owner's new hold count (> 0); 0 the hash is gone;
--           -1 the hash is not in write mode with this owner;
--         an error "WRONGTYPE dlock: <type>" when the name is not a hash.
local mode = redis.pcall('HGET', KEYS[1], 'mode')
if type(mode) == 'table' then
  if string.find(mode['err'], 'WRONGTYPE', 1, true) then
    return redis.error_reply('WRONGTYPE dlock: ' .. redis.call('TYPE', KEYS[1])['ok'])
  end
  return mode
end

-- RedissonWriteLock.tryLockInnerAsync, the branch of a held lock: one more
-- hold, and the hash's PTTL grows by a lease.
local function countUp()
  local n = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  local currentExpire = redis.call('PTTL', KEYS[1])
  redis.call('PEXPIRE', KEYS[1], currentExpire + ARGV[1])
  return n
end

if ARGV[4] == '1' then
  if mode == false then
    return 0
  end
  if mode ~= 'write' or redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
    return -1
  end
  return countUp()
end

-- Check the counter before anything is written: a grant must come with a token.
local cur = redis.pcall('GET', KEYS[3])
if type(cur) == 'table' then
  return redis.error_reply('dlock: fencing counter ' .. KEYS[3] .. ': ' .. cur['err'])
end
if cur and not string.match(cur, '^%d+$') then
  return redis.error_reply('dlock: fencing counter ' .. KEYS[3] .. ' does not hold a non-negative integer')
end

if mode == false then
  redis.call('HSET', KEYS[1], 'mode', 'write')
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return redis.call('INCR', KEYS[3])
end
if mode == 'write' and redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  countUp()
  return redis.call('INCR', KEYS[3])
end
return -1 - redis.call('PTTL', KEYS[1])
