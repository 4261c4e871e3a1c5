-- fair_acquire: take a fair lock in arrival order, or queue up for it
-- (FairMutex; Redisson's RFairLock).
-- KEYS[1]  the lock key (the lock's name): a string holding the holder's token
-- KEYS[2]  the fencing counter of the lock's hash slot: dlock:fence:{T}
-- KEYS[3]  the queue: a list of waiter ids in arrival order
-- KEYS[4]  the waiters' timeouts: a sorted set, member = waiter id, score =
--          the server time (TIME, ms) after which the waiter counts as gone
-- ARGV[1]  the waiter id, which is also the token of the hold it will get
-- ARGV[2]  the lease in milliseconds
-- ARGV[3]  the waiter timeout in milliseconds: a queued waiter that makes no
--          attempt for that long is dropped from the queue
-- ARGV[4]  '1' queue up (or stay queued) when the lock is not ours to take;
--          '0' do not (a single attempt: TryLock with no wait)
-- Returns the fencing token (> 0) when acquired: the lock was free and the
--           queue empty or headed by ARGV[1]; also when the key already holds
--           ARGV[1] (a call the client retried after a lost reply);
--         -1 - ms (<= 0) when not: ms is the holder's PTTL (so 0 means the
--           key has no expiry), or, when the lock is free but it is another
--           waiter's turn, how long until that waiter counts as gone;
--         an error "WRONGTYPE dlock: <type>" when the key holds data that dlock
--           did not write (<type> is 'string' for a string that is no token).
-- Every call starts by dropping the waiters whose timeout has passed (by the
-- server's clock), so a crashed waiter never blocks the queue for longer than
-- its timeout.
local id = ARGV[1]
local wt = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- purge drops gone waiters: those whose timeout has passed, at most 100 per
-- call (the rest go in later calls), and any head without a timeout (left
-- behind by hand).
local function purge()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. now, 'LIMIT', 0, 100)
  for _, w in ipairs(dead) do
    redis.call('LREM', KEYS[3], 0, w)
    redis.call('ZREM', KEYS[4], w)
  end
  for _ = 1, 100 do
    local head = redis.call('LINDEX', KEYS[3], 0)
    if not head or redis.call('ZSCORE', KEYS[4], head) then
      return
    end
    redis.call('LPOP', KEYS[3])
  end
end

-- enqueue puts the waiter at the back of the queue unless it is in it
-- already, and moves its timeout to now + wt either way; both keys live at
-- least as long as that timeout.
local function enqueue()
  if ARGV[4] ~= '1' then
    return
  end
  if redis.call('ZADD', KEYS[4], now + wt, id) == 1 then
    redis.call('RPUSH', KEYS[3], id)
  end
  for i = 3, 4 do
    if redis.call('PTTL', KEYS[i]) < wt then
      redis.call('PEXPIRE', KEYS[i], wt)
    end
  end
end

-- dequeue removes the waiter from the queue: it holds the lock now.
local function dequeue(head)
  if head == id then
    redis.call('LPOP', KEYS[3])
  else
    redis.call('LREM', KEYS[3], 0, id)
  end
  redis.call('ZREM', KEYS[4], id)
end

--#include fence
--#include holder

local function granted(head)
  local f = fence(KEYS[2])
  if type(f) == 'table' then
    -- The counter is unusable: undo the grant rather than leave a lock without
    -- a token (the waiter keeps its place in the queue).
    redis.call('DEL', KEYS[1])
    return redis.error_reply('dlock: fencing counter ' .. KEYS[2] .. ': ' .. f['err'])
  end
  dequeue(head)
  return f
end

purge()
local head = redis.call('LINDEX', KEYS[3], 0)
if not head or head == id then
  if redis.call('SET', KEYS[1], id, 'NX', 'PX', ARGV[2]) then
    return granted(head)
  end
end

local v = holder(KEYS[1])
if type(v) == 'table' then
  return v
end
if not v then
  -- Free, but another waiter is first in line: it has until its timeout to
  -- come and take the lock.
  enqueue()
  local s = tonumber(redis.call('ZSCORE', KEYS[4], head))
  return -1 - (math.max(s - now, 0) + 1)
end
if v == id then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return granted(head)
end
enqueue()
return -1 - redis.call('PTTL', KEYS[1])
