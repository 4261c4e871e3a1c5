-- member_release: remove an owner's member from a sorted set whose scores are
-- expiries (a reader of a read lock, a permit of an expirable semaphore) and
-- announce it.
-- KEYS[1]  the sorted set
-- ARGV[1]  the owner's token (the member)
-- ARGV[2]  how to announce: 'p' PUBLISH, 's' SPUBLISH (cluster), '' not at all
-- ARGV[3]  the notice channel of the key's hash slot
-- ARGV[4]  the notice: the object's name (KEYS[1] when absent)
-- Returns 1 removed while its lease ran; 0 not there, or expired (removed
--         too: the lease was over); -2 the key holds another Redis type.
--#include announce
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.pcall('ZSCORE', KEYS[1], ARGV[1])
if type(s) == 'table' and s['err'] then
  if string.find(s['err'], 'WRONGTYPE', 1, true) then
    return -2
  end
  return s
end
if not s then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
local notice = ARGV[4] or KEYS[1]
announce(ARGV[2], ARGV[3], notice)
if tonumber(s) <= now then
  return 0
end
return 1
