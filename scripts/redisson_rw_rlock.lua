-- redisson_rw_rlock: take a read lock in Redisson's layout (RWMutex.RLock on
-- a Client WithRedissonCompat). It follows RedissonReadLock.tryLockInnerAsync
-- (Redisson 3.x) step by step, and then takes a fencing token from
-- RFencedLock's counter (RedissonFencedLock: INCR redisson_lock_token:{name}),
-- which RReadWriteLock itself does not have.
-- KEYS[1]  the lock hash (the name): field "mode" ("read" or "write"), one
--          field per owner holding its hold count ("<clientID>:<ownerID>" a
--          reader, "<clientID>:<ownerID>:write" the writer)
-- KEYS[2]  this owner's timeout prefix: Redisson's
--          getReadWriteTimeoutNamePrefix, suffixName(name, field) ..
--          ':rwlock_timeout'; each read hold n of the owner is the string
--          KEYS[2] .. ':' .. n = "1" with PX the lease
-- KEYS[3]  the fencing counter redisson_lock_token:{name}
-- ARGV[1]  the lease in milliseconds
-- ARGV[2]  the owner's read field "<clientID>:<ownerID>"
-- ARGV[3]  the same owner's write field ARGV[2] .. ':write' (Redisson lets an
--          owner that holds the write lock take the read lock too)
-- ARGV[4]  '1': count up a read hold the handle has (a reentrant RLock);
--          '0': a new hold
-- Returns for a new hold: the fencing token (> 0) when granted; -1 - PTTL
--           (<= 0) of the hash when busy (a writer holds it);
--         for '1': the owner's new hold count (> 0); 0 the hash is gone;
--           -1 the hash has no such reader, or another owner writes;
--         an error "WRONGTYPE dlock: <type>" when the name is not a hash.
local mode = redis.pcall('HGET', KEYS[1], 'mode')
if type(mode) == 'table' then
  if string.find(mode['err'], 'WRONGTYPE', 1, true) then
    return redis.error_reply('WRONGTYPE dlock: ' .. redis.call('TYPE', KEYS[1])['ok'])
  end
  return mode
end

-- RedissonReadLock.tryLockInnerAsync, the branch of a held lock: one more
-- hold, one more timeout key, and the hash lives at least a lease.
local function countUp()
  local ind = redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  local key = KEYS[2] .. ':' .. ind
  redis.call('SET', key, 1)
  redis.call('PEXPIRE', key, ARGV[1])
  local remainTime = redis.call('PTTL', KEYS[1])
  redis.call('PEXPIRE', KEYS[1], math.max(remainTime, tonumber(ARGV[1])))
  return ind
end

if ARGV[4] == '1' then
  if mode == false then
    return 0
  end
  if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
    return -1
  end
  if mode ~= 'read' and redis.call('HEXISTS', KEYS[1], ARGV[3]) == 0 then
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
  redis.call('HSET', KEYS[1], 'mode', 'read')
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  redis.call('SET', KEYS[2] .. ':1', 1)
  redis.call('PEXPIRE', KEYS[2] .. ':1', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return redis.call('INCR', KEYS[3])
end
if mode == 'read' or (mode == 'write' and redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1) then
  countUp()
  return redis.call('INCR', KEYS[3])
end
return -1 - redis.call('PTTL', KEYS[1])
