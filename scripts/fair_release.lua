-- fair_release: delete a fair lock only if it still holds our token, and hand
-- it to the first live waiter in line with a notice addressed to it alone.
-- KEYS[1]  the lock key
-- KEYS[2]  the queue (list of waiter ids in arrival order)         } optional:
-- KEYS[3]  the waiters' timeouts (sorted set, score = server ms)   } see below
-- ARGV[1]  the token of our hold
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  the notice channel of the lock's hash slot: dlock:notice:{T}
-- ARGV[4]  the notice: the lock's name (KEYS[1] when absent)
-- With the queue keys (Unlock): first drops the waiters whose timeout has
-- passed (server clock), then, if the lock is free (deleted now, or gone
-- already), announces "<name>\n<id of the first waiter>", which wakes that
-- waiter only; with an empty queue the plain name. With KEYS[1] alone (the
-- watchdog's background release: the ownership contract of ownership.go) it
-- behaves as release.lua: the plain name, which wakes no fair waiter; they
-- look again by themselves within a third of their timeout.
-- Returns 1 deleted; 0 the key is gone (the lease ran out);
--         -1 another token holds it; -2 the key holds another Redis type;
--         an error if Redis refused the read (NOPERM, say): nothing changed.
--#include announce
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if string.find(v['err'], 'WRONGTYPE', 1, true) then
    return -2
  end
  return v
end
local status = 0
if v then
  if v ~= ARGV[1] then
    return -1
  end
  redis.call('DEL', KEYS[1])
  status = 1
end
local notice = ARGV[4] or KEYS[1]
if #KEYS >= 3 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
    notice = notice .. '\n' .. head
  elseif status == 0 then
    return 0
  end
elseif status == 0 then
  return 0
end
-- The notice is a hint: a refused publish must not turn a done release into
-- an error (waiters still look again by themselves).
announce(ARGV[2], ARGV[3], notice)
return status
