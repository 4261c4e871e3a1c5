-- rw_lock: take the write lock of a read-write lock (RWMutex.Lock) and hand
-- out the next fencing token, or register this writer's intent to wait.
-- KEYS[1]  the writer key (the lock's name): a string holding the writer's
--          token, exactly as a Mutex's key
-- KEYS[2]  the readers: a sorted set, member = a reader's token, score = its
--          expiry in server milliseconds (TIME)
-- KEYS[3]  a waiting writer's intent: a string holding its token
-- KEYS[4]  the fencing counter of the lock's hash slot: dlock:fence:{T}
-- ARGV[1]  this acquisition's token (a fresh UUID v4)
-- ARGV[2]  the lease in milliseconds
-- ARGV[3]  how long an intent lives unless refreshed, in milliseconds
-- Returns the fencing token (> 0) when granted, also when the writer key
--           already holds ARGV[1] (a call the client retried after a lost
--           reply); the intent is deleted if it is ours;
--         -1 - ms (<= 0) when busy: ms is the writer's PTTL while another
--           writer holds the lock, else the time until the earliest live
--           reader's lease ends (0: no expiry known). When busy, the intent
--           is set to ARGV[1] for ARGV[3] ms unless another writer's intent
--           is live (new readers are refused while any intent lives);
--         an error "WRONGTYPE dlock: <type>" when the name or the readers key
--           holds data that dlock did not write.
--#include fence
--#include holder

local function granted()
  local f = fence(KEYS[4])
  if type(f) == 'table' then
    -- The counter is unusable: undo the grant rather than leave a lock without a token.
    redis.call('DEL', KEYS[1])
    return redis.error_reply('dlock: fencing counter ' .. KEYS[4] .. ': ' .. f['err'])
  end
  if redis.call('GET', KEYS[3]) == ARGV[1] then
    redis.call('DEL', KEYS[3])
  end
  return f
end

-- intend sets or refreshes this writer's intent, unless another writer's lives.
local function intend()
  local cur = redis.call('GET', KEYS[3])
  if not cur or cur == ARGV[1] then
    redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3])
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local w = holder(KEYS[1])
if type(w) == 'table' then
  return w
end
if w == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return granted()
end
local purged = redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if type(purged) == 'table' and purged['err'] then
  if string.find(purged['err'], 'WRONGTYPE', 1, true) then
    return redis.error_reply('WRONGTYPE dlock: ' .. redis.call('TYPE', KEYS[2])['ok'])
  end
  return purged
end
if w then
  intend()
  return -1 - redis.call('PTTL', KEYS[1])
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #first > 0 then
  intend()
  return -1 - math.max(tonumber(first[2]) - now, 0)
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return granted()
