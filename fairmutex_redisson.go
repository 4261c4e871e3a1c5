package dlock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// DefaultRedissonFairWaitTimeout is a FairMutex's waiter timeout on a Client
// WithRedissonCompat: Redisson's RFairLock threadWaitTime default (5 minutes).
const DefaultRedissonFairWaitTimeout = 5 * time.Minute

// redissonFairOwnership is a FairMutex hold WithRedissonCompat: the owner's
// field in Redisson's lock hash, renewed as RedissonBaseLock renews it and
// released as RedissonFairLock unlocks (the next waiter in line is told on
// its own channel).
var redissonFairOwnership = newOwnership("redisson fair lock", "redisson_renew", "redisson_fair_release")

var (
	redissonFairAcquireScript = loadScript("redisson_fair_acquire")
	redissonFairAcquireSource = scriptSource("redisson_fair_acquire")
	redissonFairReenterScript = loadScript("redisson_fair_reenter")
	redissonFairReenterSource = scriptSource("redisson_fair_reenter")
	redissonFairLeaveScript   = loadScript("redisson_fair_leave")
	redissonFairReleaseSource = scriptSource("redisson_fair_release")
)

// initRedisson lays the handle out as Redisson's RFairLock: the hash at the
// name, the queue redisson_lock_queue:{name}, the timeouts
// redisson_lock_timeout:{name}, RFencedLock's counter
// redisson_lock_token:{name}, and the handle's own wake-up channel
// redisson_lock__channel:{name}:<owner field>.
func (f *FairMutex) initRedisson() {
	f.field = f.c.newOwnerField()
	queue := redissonName("redisson_lock_queue", f.name)
	timeouts := redissonName("redisson_lock_timeout", f.name)
	f.keys = []string{f.name, queue, timeouts, redissonName("redisson_lock_token", f.name)}
	f.relKeys = []string{f.name, queue, timeouts}
	f.channel = redissonName("redisson_lock__channel", f.name) + ":" + f.field
	lease, _ := f.leaseTime()
	f.leaseArg = leaseArg(lease)
	f.waitArg = leaseArg(f.wait)
}

// clientMillis is Redisson's System.currentTimeMillis(): the timeouts of a
// fair lock's line are on the clients' clocks.
func clientMillis() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }

// acquireRedisson is acquire on Redisson's layout (waitTime is TryLock's
// wait, which Redisson's tryLock(waitTime) queues with): each attempt runs
// Redisson's fair-lock script with this Client's clock; a waiter is woken by
// the message "0" on its own channel, which the unlock of any peer, Java or
// Go, publishes for the first waiter in line.
func (f *FairMutex) acquireRedisson(ctx context.Context, waitTime time.Duration, bounded bool, until time.Time) (*hold, error) {
	c := f.c
	n, err := c.single("lock", f.name)
	if err != nil {
		return nil, err
	}
	lease, renew := f.leaseTime()
	h := c.newFamilyHold(ctx, redissonFairOwnership, f.name, f.name)
	h.token = f.field
	// The field is the handle's for every hold: a background release of its
	// previous hold must land before this acquire (see watchdog.settle).
	if err := c.w.settle(ctx, f.name, f.field); err != nil {
		return nil, redisErr("lock", f.name, err)
	}
	h.relKeys = f.relKeys
	h.relArgs = [4]any{f.field, c.pubArg, f.channel, clientMillis()}
	mode, waitArg := "1", f.waitArg
	switch {
	case bounded && !until.After(time.Now()):
		mode = "0" // tryLock(): one attempt, not queued (EVAL_NULL_BOOLEAN)
	case bounded:
		waitArg = leaseArg(waitTime) // tryLock(waitTime): Redisson queues with waitTime
	}
	var (
		fence   int64
		start   int64
		queued  bool // an attempt may have put us in the line
		unknown bool // an attempt may have granted the lock unseen
	)
	try := func(actx context.Context) (bool, time.Duration, error) {
		s := c.w.now()
		v, err := n.run(actx, redissonFairAcquireScript, redissonFairAcquireSource, f.keys,
			f.leaseArg, f.field, waitArg, clientMillis(), mode)
		if err != nil {
			if arr, ok := v.([]any); ok && len(arr) > 0 && arr[0] == int64(1) {
				unknown = true // granted, but WithReplicaAck was not satisfied
			} else if _, foreign := foreignKind(err); !foreign && mayHaveRun(err) {
				unknown, queued = true, queued || mode == "1"
			}
			return false, -1, err
		}
		arr, ok := v.([]any)
		if !ok || len(arr) < 2 {
			return false, -1, fmt.Errorf("dlock: unexpected reply from redisson_fair_acquire script: %v", v)
		}
		x, _ := arr[0].(int64)
		y, ok := arr[1].(int64)
		if !ok {
			return false, -1, fmt.Errorf("dlock: unexpected reply from redisson_fair_acquire script: %v", v)
		}
		if x == 1 {
			fence, start = y, s
			return true, 0, nil
		}
		queued = queued || mode == "1"
		if len(arr) > 2 && arr[2] == int64(1) {
			return false, 0, nil // first in line of a free lock: granted next time
		}
		return false, redissonFairHint(y), nil
	}
	ok, err := c.waitFor(ctx, wait{op: "lock", name: f.name, channel: f.channel, bounded: bounded, until: until}, try)
	if ok {
		return c.grant(ctx, h, fence, start, lease, renew)
	}
	if queued || unknown {
		f.leaveRedisson(ctx, waitArg, unknown, lease)
	}
	return nil, err
}

// redissonFairHint turns the ttl Redisson's script answers into a wait hint:
// the lock's PTTL, or about when the waiter ahead times out. Redisson waits
// that long for its message, or for a message alone when the answer is
// negative (the waiter ahead is overdue, or the lock has no expiry); a Go
// waiter then looks again at its backoff's pace.
func redissonFairHint(ttl int64) time.Duration {
	if ttl < 0 {
		return -1
	}
	return time.Duration(ttl) * time.Millisecond
}

// leaveRedisson is Redisson's acquireFailedAsync: the waiter leaves the line
// and those behind it move their timeouts earlier by the wait it queued
// with; a grant it may have got unseen is deleted and the next waiter told.
// Best effort, bounded by fairLeaveTimeout: the others drop a waiter left
// behind once its timeout has passed; a grant left behind is deleted by the
// watchdog in the background.
func (f *FairMutex) leaveRedisson(ctx context.Context, waitArg string, unknown bool, lease time.Duration) {
	c := f.c
	n, err := c.single("lock", f.name)
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(fairLeaveTimeout, c.cfg.closeTimeout))
	defer cancel()
	undo := "0"
	if unknown {
		undo = "1"
	}
	keys := []string{f.relKeys[1], f.relKeys[2], f.name}
	_, err = redissonFairLeaveScript.Run(lctx, n.rdb, keys, f.field, waitArg, undo, c.pubArg).Result()
	n.reroute(err)
	if err != nil {
		c.log.Debug("dlock: leaving the fair lock's line failed", "name", f.name, "error", err)
		if unknown {
			c.w.orphanAcquire(redissonFairOwnership, f.name, f.field, lease)
		}
	}
}

// reenterRedisson counts a reentrant handle's hold up in Redis, as Redisson's
// re-entry does (HINCRBY the field, PEXPIRE the lease). It returns the
// script's status (1 done; 0, -1, -2 as renewals) and when it was sent.
func (f *FairMutex) reenterRedisson(ctx context.Context) (int64, int64, error) {
	n, err := f.c.single("lock", f.name)
	if err != nil {
		return 0, 0, err
	}
	start := f.c.w.now()
	st, err := n.run(ctx, redissonFairReenterScript, redissonFairReenterSource, f.keys[:1], f.field, f.leaseArg)
	if err != nil {
		return 0, start, err
	}
	x, ok := st.(int64)
	if !ok {
		return 0, start, fmt.Errorf("dlock: unexpected reply from redisson_fair_reenter script: %v", st)
	}
	return x, start, nil
}

// countDownRedisson is a reentrant Unlock that is not the last, on Redisson's
// layout: Redisson's unlock with the lease, which counts the field down and
// extends the lease (status 2), or reports that the hold is gone.
func (f *FairMutex) countDownRedisson(ctx context.Context) (int64, error) {
	n, err := f.c.single("unlock", f.name)
	if err != nil {
		return 0, err
	}
	_, release, _, _ := redissonFairOwnership.scripts()
	v, err := n.run(ctx, release, redissonFairReleaseSource, f.relKeys, f.field, f.c.pubArg, f.channel, clientMillis(), f.leaseArg)
	if err != nil {
		return 0, err
	}
	x, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("dlock: unexpected reply from redisson_fair_release script: %v", v)
	}
	return x, nil
}
