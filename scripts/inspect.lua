-- inspect: read a lock's state without changing it.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of the lock's hash slot
-- Returns {type of the lock key, its PTTL, the counter's value or "0"}; the
-- type is 'foreign' for a string that is not a dlock token.
-- The counter is shared by every name of the slot: its value is the last token
-- handed out for any of them, an upper bound for this name's last token.
local c = redis.pcall('GET', KEYS[2])
if type(c) ~= 'string' then
  c = '0'
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' and (redis.call('STRLEN', KEYS[1]) ~= 36 or not string.match(redis.call('GET', KEYS[1]),
    '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$')) then
  kind = 'foreign'
end
return {kind, redis.call('PTTL', KEYS[1]), c}
