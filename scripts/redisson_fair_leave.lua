-- redisson_fair_leave: take a FairMutex waiter that gives up out of the line,
-- WithRedissonCompat (RedissonFairLock.acquireFailedAsync: the waiters behind
-- it get their timeouts moved earlier by the wait it queued with, then it
-- leaves the queue and the timeout set), and delete a grant it may have got
-- unseen (a lost reply), telling the next waiter as Redisson's unlock does.
-- KEYS[1]  the queue redisson_lock_queue:{name}
-- KEYS[2]  the timeouts redisson_lock_timeout:{name}
-- KEYS[3]  the lock hash (the lock's name)
-- ARGV[1]  the owner field <clientID>:<owner>
-- ARGV[2]  the wait in ms the waiter queued with (threadWaitTime or waitTime)
-- ARGV[3]  '1' delete the owner's field from the lock if there; '0' do not
-- ARGV[4]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- Returns an array {left, undone}: left is 1 when the waiter was in the
-- queue, else 0; undone is 1 when its field was deleted from the lock.
-- get the existing timeout for the thread to remove
--#include announce
local queue = redis.call('LRANGE', KEYS[1], 0, -1)
-- find the location in the queue where the thread is
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do
  i = i + 1
end
-- go to the next index which will exist after the current thread is removed
i = i + 1
-- decrement the timeout for the rest of the queue after the thread being removed
while i <= #queue do
  redis.call('ZINCRBY', KEYS[2], -tonumber(ARGV[2]), queue[i])
  i = i + 1
end
-- remove the thread from the queue and timeouts set
redis.call('ZREM', KEYS[2], ARGV[1])
local left = redis.call('LREM', KEYS[1], 0, ARGV[1])

local undone = 0
if ARGV[3] == '1' and redis.call('TYPE', KEYS[3])['ok'] == 'hash'
    and redis.call('HDEL', KEYS[3], ARGV[1]) == 1 then
  undone = 1
  if redis.call('EXISTS', KEYS[3]) == 0 then
    local nextThreadId = redis.call('LINDEX', KEYS[1], 0)
    if nextThreadId ~= false then
      local channel = 'redisson_lock__channel:{' .. KEYS[3] .. '}:' .. nextThreadId
      if string.find(KEYS[3], '{', 1, true) then
        channel = 'redisson_lock__channel:' .. KEYS[3] .. ':' .. nextThreadId
      end
      announce(ARGV[4], channel, '0')
    end
  end
end
return {math.min(left, 1), undone}
