-- redisson_rw_read_renew: renew read locks in Redisson's layout, one watchdog
-- batch. Each key follows RedissonReadLock.renewExpirationAsync (Redisson
-- 3.x): if the owner's field is there, PEXPIRE the hash and, when the hash
-- has more fields than one, every rwlock_timeout key of every owner in it
-- (Redisson renews them all, not only this owner's).
-- KEYS[i]    a lock hash
-- ARGV[1]    the lease in milliseconds
-- ARGV[i+1]  the owner's read field expected in KEYS[i]
-- Returns an array, one entry per key: 1 extended; 0 the key is gone;
--         -1 the hash has no such owner; -2 the key is not a hash.
-- The timeout keys are not in KEYS: their names depend on the hash's fields,
-- as in Redisson's script; they share the hash's slot ("{name}:...").
local out = {}
for i = 1, #KEYS do
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind == 'none' then
    out[i] = 0
  elseif kind ~= 'hash' then
    out[i] = -2
  elseif redis.call('HGET', KEYS[i], ARGV[i + 1]) == false then
    out[i] = -1
  else
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    if redis.call('HLEN', KEYS[i]) > 1 then
      -- Redisson's getKeyPrefix: "{name}", or the name when it has a brace.
      local prefix = KEYS[i]
      if not string.find(prefix, '{', 1, true) then
        prefix = '{' .. prefix .. '}'
      end
      local keys = redis.call('HKEYS', KEYS[i])
      for _, key in ipairs(keys) do
        local counter = tonumber(redis.call('HGET', KEYS[i], key))
        if type(counter) == 'number' then
          for n = counter, 1, -1 do
            redis.call('PEXPIRE', prefix .. ':' .. key .. ':rwlock_timeout:' .. n, ARGV[1])
          end
        end
      end
    end
    out[i] = 1
  end
end
return out
