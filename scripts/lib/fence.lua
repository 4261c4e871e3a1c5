-- fence(key): the next fencing token from the counter at key (a slot's
-- dlock:fence:{T}): the counter plus one, but never below the server clock in
-- microseconds, so a counter that was lost (a restart without persistence) or
-- went back (a failover to a replica that missed increments, an old backup)
-- resumes above every token handed out before. Returns the token, or the
-- error table of the call that failed (the caller undoes its grant).
-- Included by the scripts that grant (see scriptSource in scripts.go).
local function fence(key)
  local f = redis.pcall('INCR', key)
  if type(f) == 'table' then
    return f
  end
  local t = redis.pcall('TIME')
  if t['err'] then
    return t
  end
  local now = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  if f < tonumber(now) then
    local ok = redis.pcall('SET', key, now)
    if ok['err'] then
      return ok
    end
    return tonumber(now)
  end
  return f
end
