-- counter(key): what a counter key holds (a semaphore's permits, a latch's
-- count): the integer as a string, or false when the key does not exist; as
-- a second value, an error reply when the key holds data dlock did not write
-- ("WRONGTYPE dlock: <type>": another type, or a string that is no integer;
-- such a key is never modified) or Redis refused the read.
local function counter(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v['err'] then
    if string.find(v['err'], 'WRONGTYPE', 1, true) then
      return false, redis.error_reply('WRONGTYPE dlock: ' .. redis.call('TYPE', key)['ok'])
    end
    return false, v
  end
  if v and (#v > 20 or not string.match(v, '^%-?%d+$')) then
    return false, redis.error_reply('WRONGTYPE dlock: string')
  end
  return v, nil
end
