-- sem_acquire: take permits of a semaphore if enough are available.
-- KEYS[1]  the semaphore: a string holding the number of available permits
--          (Redisson's RSemaphore layout); absent counts as 0
-- ARGV[1]  how many permits to take (> 0)
-- Returns {1, permits left} when taken (DECRBY);
--         {0, permits available} when too few are;
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
if not v then
  return {0, 0}
end
if #v > 20 or not string.match(v, '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE dlock: string')
end
local n = tonumber(ARGV[1])
local available = tonumber(v)
if available < n then
  return {0, available}
end
return {1, redis.call('DECRBY', KEYS[1], n)}
