-- holder(key): the token a lock key holds, false when the key does not
-- exist, or an error reply "WRONGTYPE dlock: <type>" when it holds data dlock
-- did not write (another type, or a string that is not a UUID v4 token; such
-- a key is never touched).
local function holder(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return false
  end
  if kind ~= 'string' then
    return redis.error_reply('WRONGTYPE dlock: ' .. kind)
  end
  if redis.call('STRLEN', key) ~= 36 then
    return redis.error_reply('WRONGTYPE dlock: string')
  end
  local v = redis.call('GET', key)
  if not string.match(v, '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$') then
    return redis.error_reply('WRONGTYPE dlock: string')
  end
  return v
end
