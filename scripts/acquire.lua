-- acquire: take a free lock and hand out the next fencing token.
-- KEYS[1]  the lock key (the lock's name)
-- KEYS[2]  the fencing counter of the lock's hash slot: dlock:fence:{T}
-- ARGV[1]  this acquisition's token (a fresh UUID v4)
-- ARGV[2]  the lease in milliseconds
-- Returns the fencing token (> 0) when acquired, also when the key already
--           holds ARGV[1] (a call the client retried after a lost reply);
--         -1 - pttl (<= 0) when another token holds the lock, so 0 means the
--           key has no expiry and -1 - v recovers its PTTL in milliseconds;
--         an error "WRONGTYPE dlock: <type>" when the key holds data that dlock
--           did not write (<type> is 'string' for a string that is no token).
-- One integer, not an array: the reply is the cheapest to send and to read.
-- The next token is the counter plus one, but never below the server clock in
-- microseconds: a counter that was lost (a restart without persistence) or
-- that went back (a failover to a replica that missed the last increments,
-- an old backup) resumes above every token handed out before.
-- Every call here is a pcall: on any error the grant is undone (below), so a
-- refused or failed step never leaves a lock without an owner.
--#include fence
--#include holder

local function granted()
  local f = fence(KEYS[2])
  if type(f) == 'table' then
    -- The counter is unusable: undo the grant rather than leave a lock without a token.
    redis.call('DEL', KEYS[1])
    return redis.error_reply('dlock: fencing counter ' .. KEYS[2] .. ': ' .. f['err'])
  end
  return f
end

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return granted()
end

-- The key exists (SET NX refused it): whose is it?
local v = holder(KEYS[1])
if type(v) == 'table' then
  return v
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return granted()
end
return -1 - redis.call('PTTL', KEYS[1])
