-- raise: lift a fencing counter to at least a token (Redlock). After a grant
-- on a majority, the holder raises the counters of the nodes that granted it
-- to the token it took (the largest of theirs), so the next grant, whose
-- majority shares a node with this one, hands out a larger token.
-- KEYS[1]  the fencing counter of the lock's hash slot
-- ARGV[1]  the token
-- Returns 1.
local c = redis.call('GET', KEYS[1])
if not c or tonumber(c) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
