-- release: delete the lock only if it still holds our token, and announce it.
-- KEYS[1]  the lock key
-- ARGV[1]  the token of our hold
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  the notice channel of the lock's hash slot: dlock:notice:{T}. An
--          argument, not a key: during a slot migration Redis answers a
--          script whose keys are not all present TRYAGAIN, and the channel is
--          never a key; it shares KEYS[1]'s slot, so SPUBLISH stays local.
-- Returns 1 deleted (and announced, with the lock's name as the message);
--         0 the key is gone (the lease ran out);
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
if not v then
  return 0
end
if v ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
-- The notice is a hint: a refused publish must not turn a done release into
-- an error (waiters still wake by their backoff and the lease).
announce(ARGV[2], ARGV[3], KEYS[1])
return 1
