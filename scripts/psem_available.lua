-- psem_available: the permits of an expirable semaphore that are free now.
-- KEYS[1]  the semaphore: a string holding the total number of permits
-- KEYS[2]  the permits taken: a sorted set, member = id, score = expiry in
--          server milliseconds
-- Returns the total less the permits whose lease still runs (expired ones
--           are removed: their lease is over); negative when the total was
--           lowered below the permits taken;
--         an error "WRONGTYPE dlock: <type>" when KEYS[1] holds data dlock
--           did not write.
--#include counter
local v, bad = counter(KEYS[1])
if bad then
  return bad
end
local total = 0
if v then
  total = tonumber(v)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local purged = redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if type(purged) == 'table' and purged['err'] then
  return redis.error_reply('ERR dlock: key ' .. KEYS[2] .. ' of the semaphore holds a ' ..
    redis.call('TYPE', KEYS[2])['ok'] .. ', not its permits')
end
return total - redis.call('ZCARD', KEYS[2])
