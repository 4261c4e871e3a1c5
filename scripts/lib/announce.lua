-- announce(how, channel, message): publish a notice, 'p' by PUBLISH, 's' by
-- SPUBLISH (a cluster), anything else not at all. A refused publish is
-- ignored: a notice is a hint, and a done release must not fail for it
-- (waiters still wake by their backoff and the holder's lease).
local function announce(how, channel, message)
  if how == 'p' then
    redis.pcall('PUBLISH', channel, message)
  elseif how == 's' then
    redis.pcall('SPUBLISH', channel, message)
  end
end
