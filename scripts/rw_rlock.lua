-- rw_rlock: take a read lock of a read-write lock (RWMutex.RLock) and hand
-- out the next fencing token.
-- KEYS[1]  the writer key (the lock's name): a string holding the writer's
--          token, exactly as a Mutex's key
-- KEYS[2]  the readers: a sorted set, member = a reader's token, score = its
--          expiry in server milliseconds (TIME)
-- KEYS[3]  a waiting writer's intent: a string holding its token, with a
--          short PX that the writer refreshes on each of its attempts
-- KEYS[4]  the fencing counter of the lock's hash slot: dlock:fence:{T}
-- ARGV[1]  this reader's token (a fresh UUID v4)
-- ARGV[2]  the lease in milliseconds
-- Returns the fencing token (> 0) when granted, also when the readers already
--           hold ARGV[1] (a call the client retried after a lost reply);
--         -1 - ms (<= 0) when refused: ms is the writer's PTTL while a writer
--           holds the lock, or the intent's PTTL while another writer waits
--           (writer preference: new readers queue behind a waiting writer);
--           0 means the blocking key has no expiry;
--         an error "WRONGTYPE dlock: <type>" when the name or the readers key
--           holds data that dlock did not write.
-- Expired readers are removed first (their lease is over), so a reader that
-- died without RUnlock blocks writers only until its lease ends.
--#include fence
--#include holder

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])

local w = holder(KEYS[1])
if type(w) == 'table' then
  return w
end
local purged = redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if type(purged) == 'table' and purged['err'] then
  if string.find(purged['err'], 'WRONGTYPE', 1, true) then
    return redis.error_reply('WRONGTYPE dlock: ' .. redis.call('TYPE', KEYS[2])['ok'])
  end
  return purged
end

local function granted()
  redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
  if redis.call('PTTL', KEYS[2]) < lease then
    redis.call('PEXPIRE', KEYS[2], lease)
  end
  local f = fence(KEYS[4])
  if type(f) == 'table' then
    -- The counter is unusable: undo the grant rather than leave a reader without a token.
    redis.call('ZREM', KEYS[2], ARGV[1])
    return redis.error_reply('dlock: fencing counter ' .. KEYS[4] .. ': ' .. f['err'])
  end
  return f
end

if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return granted()
end
if w then
  return -1 - redis.call('PTTL', KEYS[1])
end
local intent = redis.pcall('GET', KEYS[3])
if type(intent) == 'table' then
  return intent
end
if intent and intent ~= ARGV[1] then
  return -1 - redis.call('PTTL', KEYS[3])
end
return granted()
