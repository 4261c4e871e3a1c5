package dlock

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RWMutex in Redisson's layout (WithRedissonCompat): the state of
// RReadWriteLock (RedissonReadWriteLock, RedissonReadLock, RedissonWriteLock
// in Redisson 3.x), so that Go and Java processes share one read-write lock.
//
//	<name>                                   hash: "mode" = "read" | "write",
//	                                         "<clientID>:<ownerID>" = read hold count,
//	                                         "<clientID>:<ownerID>:write" = write hold count;
//	                                         PX the lease
//	{<name>}:<clientID>:<ownerID>:rwlock_timeout:<n>
//	                                         string "1", PX the lease: read hold n of the owner
//	redisson_rwlock:{<name>}                 channel: "0" (UNLOCK_MESSAGE) when a read
//	                                         unlock deletes the hash, "1" (READ_UNLOCK_MESSAGE)
//	                                         when a write unlock does
//	redisson_lock_token:{<name>}             RFencedLock's counter (INCR per grant): the
//	                                         fencing tokens, which RReadWriteLock lacks
//
// (the braces are left out where the name has one, as Redisson's prefixName
// and suffixName do).

// The acquire scripts of Redisson's read-write lock (scripts/redisson_rw_*.lua).
var (
	redissonRLockScript = loadScript("redisson_rw_rlock")
	redissonLockScript  = loadScript("redisson_rw_lock")
	redissonRLockSource = scriptSource("redisson_rw_rlock")
	redissonLockSource  = scriptSource("redisson_rw_lock")
)

// The holds of Redisson's read-write lock: an owner's read field (renewed
// with every rwlock_timeout key, as RedissonReadLock.renewExpirationAsync
// does) and an owner's write field. Their release scripts take an optional
// ARGV[5] (the lease): count down by one instead of removing the owner.
var (
	redissonReadOwn  = newOwnership("redisson read lock", "redisson_rw_read_renew", "redisson_rw_read_release")
	redissonWriteOwn = newOwnership("redisson write lock", "redisson_renew", "redisson_rw_write_release")
)

// rwRedisson is what a handle of a Client WithRedissonCompat keeps.
type rwRedisson struct {
	rfield, wfield string // the owner's read field and write field
}

// initRedisson sets up a handle for Redisson's layout: its owner field (one
// per handle), the acquire scripts' KEYS and Redisson's channel.
func (rw *RWMutex) initRedisson() {
	owner := rw.c.newOwnerField()
	rw.rs = &rwRedisson{rfield: owner, wfield: owner + ":write"}
	// RedissonReadLock.getReadWriteTimeoutNamePrefix: suffixName(name, field) + ":rwlock_timeout".
	timeouts := redissonSuffixName(rw.name, owner) + ":rwlock_timeout"
	rw.keys = []string{rw.name, timeouts, redissonName("redisson_lock_token", rw.name)}
	rw.channel = redissonName("redisson_rwlock", rw.name)
}

// redissonSuffixName is Redisson's suffixName: "{<name>}:<suffix>", or
// "<name>:<suffix>" when the name has a brace.
func redissonSuffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// redissonArgs returns the acquire script, its source, the ownership, the
// owner field and the ARGV of an acquisition of mode; nested counts up a
// hold the handle has.
func (rw *RWMutex) redissonArgs(mode rwMode, nested bool) (*ownershipScript, []any) {
	n := "0"
	if nested {
		n = "1"
	}
	if mode == rwRead {
		return &ownershipScript{redissonRLockScript, redissonRLockSource, redissonReadOwn, rw.rs.rfield},
			[]any{rw.leaseArg, rw.rs.rfield, rw.rs.wfield, n}
	}
	return &ownershipScript{redissonLockScript, redissonLockSource, redissonWriteOwn, rw.rs.wfield},
		[]any{rw.leaseArg, rw.rs.wfield, "", n}
}

// redissonReenter counts up a reentrant handle's hold h of mode in Redis as
// Redisson does (HINCRBY the owner's field; a read hold adds a timeout key):
// done is false when h is no longer the handle's hold, so the caller
// acquires afresh. Called with rw.cmu held.
func (rw *RWMutex) redissonReenter(ctx context.Context, h *hold, mode rwMode) (ok bool, err error, done bool) {
	op := opOf(mode)
	s, args := rw.redissonArgs(mode, true)
	start := rw.c.w.now()
	v, err := rw.n.run(ctx, s.script, s.src, rw.keys, args...)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctxErr(ctx, op, rw.name, err), true
		}
		return false, redisErr(op+" (reentrant)", rw.name, err), true
	}
	count, isInt := v.(int64)
	if !isInt {
		return false, rwReplyError(fmt.Sprintf("dlock: unexpected reply from the %s script: %v", op, v)), true
	}
	if count <= 0 {
		rw.c.w.loseHold(h, lossReason(count))
		return false, fmt.Errorf("dlock: %s %s (reentrant): %w", op, quote(rw.name), h.why()), true
	}
	rw.c.w.confirmed(h, start)
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.h != h {
		return false, nil, false
	}
	h.count = int(count) // the server's count: a retried call may have counted twice
	return true, nil, true
}

// redissonCountDown counts a reentrant handle's hold h of mode down by one
// in Redis, as Redisson's unlock does. It reports whether h is still held
// (2); on any other answer the caller ends the hold. Called with rw.cmu held.
func (rw *RWMutex) redissonCountDown(ctx context.Context, h *hold, mode rwMode) (int64, error) {
	own := redissonReadOwn
	if mode == rwWrite {
		own = redissonWriteOwn
	}
	args := append(h.relArgs[:h.nargs:h.nargs], rw.leaseArg)
	v, err := rw.n.run(ctx, own.release, own.releaseSrc, h.relKeys, args...)
	if err != nil {
		return 0, err
	}
	st, ok := v.(int64)
	if !ok {
		return 0, rwReplyError(fmt.Sprintf("dlock: unexpected reply from the %s release script: %v", own.name, v))
	}
	return st, nil
}

// ownershipScript is an acquire script with what its hold owns.
type ownershipScript struct {
	script *redis.Script
	src    string
	own    *ownership
	field  string
}
