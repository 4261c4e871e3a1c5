-- latch_count_down: count a latch down by one; at zero delete it and announce
-- it, so that its waiters go.
-- KEYS[1]  the latch: a string holding its count
-- ARGV[1]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[2]  the notice channel of the key's hash slot (the message is KEYS[1],
--          the latch's name)
-- Returns the count left (0 when the latch opened, or was not set: counting
--           down a latch that is not set changes nothing);
--         an error "WRONGTYPE dlock: <type>" when the key holds data dlock did
--           not write: such a key is never modified.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v['err'] then
  if string.find(v['err'], 'WRONGTYPE', 1, true) then
    return redis.error_reply('WRONGTYPE dlock: ' .. redis.call('TYPE', KEYS[1])['ok'])
  end
  return v
end
if not v then
  return 0
end
if #v > 20 or not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE dlock: string')
end
local count = redis.call('DECRBY', KEYS[1], 1)
if count > 0 then
  return count
end
redis.call('DEL', KEYS[1])
-- The notice is a hint: a refused publish must not fail a done count-down.
if ARGV[1] == 'p' then
  redis.pcall('PUBLISH', ARGV[2], KEYS[1])
elseif ARGV[1] == 's' then
  redis.pcall('SPUBLISH', ARGV[2], KEYS[1])
end
return 0
