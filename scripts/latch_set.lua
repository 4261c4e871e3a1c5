-- latch_set: set a count-down latch's count only if it is not set (the key
-- is absent, or holds 0 or less): Redisson's trySetCount.
-- KEYS[1]  the latch: a string holding its count (Redisson's layout)
-- ARGV[1]  the count (> 0)
-- Returns 1 set; 0 the latch is set already (unchanged);
--         an error "WRONGTYPE dlock: <type>" when the key holds data dlock did
--           not write (<type> is 'string' for a string that is no integer):
--           such a key is never modified.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v['err'] then
  if string.find(v['err'], 'WRONGTYPE', 1, true) then
    return redis.error_reply('WRONGTYPE dlock: ' .. redis.call('TYPE', KEYS[1])['ok'])
  end
  return v
end
if v then
  if #v > 20 or not string.match(v, '^%-?%d+$') then
    return redis.error_reply('WRONGTYPE dlock: string')
  end
  if tonumber(v) > 0 then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
