-- member_renew: extend members of sorted sets whose score is their expiry
-- (a read lock's readers, an expirable semaphore's permits; one watchdog batch).
-- KEYS[i]    a sorted set: member = an owner's token, score = its expiry in
--            server milliseconds (TIME)
-- ARGV[1]    the lease in milliseconds
-- ARGV[i+1]  the token expected as a member of KEYS[i]
-- Returns an array, one entry per key: 1 extended; 0 the member is gone or
--         expired (an expired one is removed: its lease is over);
--         -2 the key holds another Redis type;
--         or an error if Redis refused a read.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local s = redis.pcall('ZSCORE', KEYS[i], ARGV[i + 1])
  if type(s) == 'table' and s['err'] then
    if not string.find(s['err'], 'WRONGTYPE', 1, true) then
      return s
    end
    out[i] = -2
  elseif not s then
    out[i] = 0
  elseif tonumber(s) <= now then
    redis.call('ZREM', KEYS[i], ARGV[i + 1])
    out[i] = 0
  else
    redis.call('ZADD', KEYS[i], 'XX', now + lease, ARGV[i + 1])
    if redis.call('PTTL', KEYS[i]) < lease then
      redis.call('PEXPIRE', KEYS[i], lease)
    end
    out[i] = 1
  end
end
return out
