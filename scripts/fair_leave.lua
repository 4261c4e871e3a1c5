-- fair_leave: take a waiter that gives up (its context ended, its wait ran
-- out, its Client closed) out of a fair lock's queue, and pass its turn on.
-- KEYS[1]  the lock key
-- KEYS[2]  the queue (list of waiter ids in arrival order)
-- KEYS[3]  the waiters' timeouts (sorted set, score = server ms)
-- ARGV[1]  the waiter id (also the token its hold would have carried)
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  the notice channel of the lock's hash slot: dlock:notice:{T}
-- ARGV[4]  the lock's name
-- If the lock key holds the waiter's id (an attempt was granted but its reply
-- was lost), that grant is deleted too. If the waiter was first in line, or
-- its grant was deleted, and the lock is free, the next live waiter is told
-- with a notice "<name>\n<its id>".
-- Returns an array {left, undone}: left is 1 when the waiter was in the queue,
-- else 0; undone is 1 when a grant of the waiter was deleted, else 0.
--#include announce
local id = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wasHead = redis.call('LINDEX', KEYS[2], 0) == id
local left = redis.call('LREM', KEYS[2], 0, id)
redis.call('ZREM', KEYS[3], id)
local undone = 0
local v = redis.pcall('GET', KEYS[1])
if v == id then
  redis.call('DEL', KEYS[1])
  undone = 1
end
if (wasHead or undone == 1) and redis.call('EXISTS', KEYS[1]) == 0 then
  -- As in fair_acquire.lua: drop gone waiters, then heads without a timeout.
  local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now, 'LIMIT', 0, 100)
  for _, w in ipairs(dead) do
    redis.call('LREM', KEYS[2], 0, w)
    redis.call('ZREM', KEYS[3], w)
  end
  local head = redis.call('LINDEX', KEYS[2], 0)
  for _ = 1, 100 do
    if not head or redis.call('ZSCORE', KEYS[3], head) then
      break
    end
    redis.call('LPOP', KEYS[2])
    head = redis.call('LINDEX', KEYS[2], 0)
  end
  if head then
    local notice = ARGV[4] .. '\n' .. head
    announce(ARGV[2], ARGV[3], notice)
  end
end
return {left, undone}
