-- inspect: read a lock's state without changing it.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of the lock's hash slot
-- Returns {type of the lock key, its PTTL, the counter's value or "0"}.
-- The counter is shared by every name of the slot: its value is the last token
-- handed out for any of them, an upper bound for this name's last token.
local c = redis.pcall('GET', KEYS[2])
if type(c) ~= 'string' then
  c = '0'
end
return {redis.call('TYPE', KEYS[1])['ok'], redis.call('PTTL', KEYS[1]), c}
