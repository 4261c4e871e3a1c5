-- renew: extend every listed lock that still holds its token (one watchdog batch).
-- KEYS[i]    a lock key
-- ARGV[1]    the lease in milliseconds
-- ARGV[i+1]  the token expected in KEYS[i]
-- Returns an array, one entry per key: 1 extended; 0 the key is gone;
--         -1 another token holds it; -2 the key holds another Redis type;
--         or an error if Redis refused a read.
-- A key that is gone is never recreated: an expired lease stays expired.
local out = {}
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' then
    if not string.find(v['err'], 'WRONGTYPE', 1, true) then
      return v -- refused (NOPERM, say): the whole batch reports the error
    end
    out[i] = -2
  elseif not v then
    out[i] = 0
  elseif v ~= ARGV[i + 1] then
    out[i] = -1
  else
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  end
end
return out
