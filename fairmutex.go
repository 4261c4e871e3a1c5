package dlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// DefaultFairWaitTimeout is how long a queued FairMutex waiter may go without
// an attempt before the others count it as gone and skip it (Redisson's
// threadWaitTime): a waiter looks again at least every third of it.
const DefaultFairWaitTimeout = 5 * time.Second

// fairLeaveTimeout bounds how long a FairMutex waiter that gives up spends
// taking itself out of the queue (best effort: a waiter left behind is
// dropped by the others after its wait timeout anyway).
const fairLeaveTimeout = time.Second

// A FairMutex is a lock on one name that is granted in arrival order across
// the fleet (Redisson's RFairLock): first come, first served. Get one from
// Client.NewFairMutex.
//
// The lock itself is a Mutex's: the string key name holding the holder's
// token, renewed by the Client's watchdog, with a fencing token per grant.
// So a Mutex and a FairMutex on one name exclude each other (a Mutex does not
// queue, though, and may overtake the line). Next to it, Redis keeps the line
// of waiters: a list of waiter ids in arrival order and a sorted set of their
// timeouts (server time). A waiter is granted the lock only when it is free
// and the waiter is first in line; Unlock wakes that waiter alone, with a
// notice addressed to it. A waiter refreshes its timeout on every attempt and
// looks again at least every third of its wait timeout (WithFairWaitTimeout,
// DefaultFairWaitTimeout), so a waiter that crashed is skipped once its
// timeout has passed, by the server's clock (the price: every waiter runs one
// script per third of its timeout while it waits). A waiter that gives up (its
// context ends, its TryLock wait runs out, its Client closes) leaves the line
// at once and, when it was first, passes its turn on.
//
// Differences from Redisson: a waiter's timeout is its own (refreshed by its
// attempts) rather than chained to the timeouts of the waiters ahead of it;
// timeouts are read on the server's clock, where Redisson sends the client's;
// the next waiter is woken by a notice addressed to it on the slot's shared
// channel, where Redisson subscribes every waiting thread to a channel of its
// own. TryLock(ctx, 0) does not queue but still respects the line, as
// Redisson's tryLock() does. A waiter that missed its timeout (a long pause,
// a Redis outage longer than the timeout) goes to the back of the line. A hold
// released in the background (its Lock context ended, Client.Close, a
// failed Unlock retried) announces the release without an address, which
// wakes no fair waiter: the first in line then takes the lock when it looks
// again, within a third of its wait timeout.
//
// Goroutines sharing one handle take turns locally before they queue in
// Redis, as with a Mutex (the handle is one owner). WithLeaseTime and
// WithReentrant apply as to a Mutex. A FairMutex needs a single deployment:
// on a Redlock Client every call fails with ErrInvalidArgument.
//
// On a Client WithRedissonCompat, a FairMutex is stored exactly as
// Redisson's RFairLock (RedissonFairLock.java): the hash at the name with the
// field "<clientID>:go-<n>" (one per handle) holding the hold count, the
// queue list redisson_lock_queue:{name} and the timeouts sorted set
// redisson_lock_timeout:{name} run by Redisson's own scripts with this
// Client's clock (a waiter's timeout is chained from the waiter ahead plus
// the wait, as Redisson computes it; the default wait is Redisson's,
// DefaultRedissonFairWaitTimeout, and TryLock queues with its own wait, as
// tryLock(waitTime) does). Unlock publishes "0" on
// redisson_lock__channel:{name}:<field of the first waiter>, the channel each
// Java or Go waiter subscribes to, and a waiter that gives up leaves as
// Redisson's acquireFailed. So Java and Go threads share one line. Fencing
// tokens come from RFencedLock's counter redisson_lock_token:{name} (a plain
// INCR, no floor: RFairLock itself has none). A waiter does not refresh its
// timeout while it waits (Redisson's does not either): one that waits longer
// than its timeout is dropped by the next call and queues again at the back.
//
// All methods are safe for concurrent use. The zero value is not usable.
type FairMutex struct {
	c         *Client
	name      string
	keys      []string // {name, fence, queue, timeouts}: the acquire script's KEYS (Redisson: {name, queue, timeouts, token})
	relKeys   []string // {name, queue, timeouts}: the release and leave scripts' KEYS
	channel   string   // the notice channel (Redisson: the handle's own wake-up channel)
	field     string   // WithRedissonCompat: the owner field <clientID>:go-<n>, else ""
	leaseArg  string
	waitArg   string
	lease     time.Duration // fixed lease, or 0: the watchdog's
	wait      time.Duration // the waiter timeout
	reentrant bool
	err       error

	slot chan struct{} // full from a first Lock until its last Unlock

	mu   sync.Mutex
	h    *hold // the current hold, live or ended but not yet unlocked
	last error // how the previous hold ended, once unlocked
}

// fairOwnership is a FairMutex hold: a Mutex's key, renewed by renew.lua and
// released by fair_release.lua, which hands the lock to the next in line.
var fairOwnership = newOwnership("fair lock", "renew", "fair_release")

var (
	fairAcquireScript = loadScript("fair_acquire")
	fairAcquireSource = scriptSource("fair_acquire")
	fairLeaveScript   = loadScript("fair_leave")
	fairLeaveSource   = scriptSource("fair_leave")
)

// WithFairWaitTimeout sets how long a queued FairMutex waiter may go without
// an attempt before the other waiters count it as gone and skip it
// (Redisson's threadWaitTime; default DefaultFairWaitTimeout). A live waiter
// looks again at least every d/3, so d should be well above a round trip to
// Redis and any pause the process may take; a larger d makes a crashed
// waiter hold up the line for longer. Zero or negative makes every call on
// the handle fail with ErrInvalidArgument, and so does this option on
// anything but NewFairMutex. On a Client WithRedissonCompat, d is Redisson's
// threadWaitTime (default DefaultRedissonFairWaitTimeout): the amount a
// waiter's timeout lies after the one ahead of it; waiters do not refresh it.
func WithFairWaitTimeout(d time.Duration) MutexOption {
	return func(m *Mutex) {
		if d <= 0 {
			m.err = invalid("fair wait timeout must be positive, got %v", d)
		}
		m.fairWait = d
	}
}

// NewFairMutex returns a handle on the fair lock called name. It does not
// talk to Redis. WithLeaseTime, WithReentrant and WithFairWaitTimeout apply.
// An empty name, a name starting with "dlock:fence:", an invalid option or a
// Redlock Client does not panic: every call on the handle then returns an
// error matching ErrInvalidArgument.
func (c *Client) NewFairMutex(name string, opts ...MutexOption) *FairMutex {
	f := &FairMutex{c: c, name: name, wait: DefaultFairWaitTimeout, slot: make(chan struct{}, 1)}
	if c != nil && c.redisson() {
		f.wait = DefaultRedissonFairWaitTimeout
	}
	m := &Mutex{} // collects the options
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	if m.fairWait > 0 {
		f.wait = m.fairWait
	}
	f.lease, f.reentrant, f.err = m.lease, m.reentrant, m.err
	switch {
	case f.err != nil:
	case c == nil:
		f.err = invalid("NewFairMutex called on a nil *Client")
	case name == "":
		f.err = invalid("lock name is empty")
	case strings.HasPrefix(name, fencePrefix):
		f.err = invalid("lock name %s is in the prefix %q that dlock reserves for its fencing counters", quote(name), fencePrefix)
	default:
		if _, err := c.single("NewFairMutex", name); err != nil {
			f.err = err
		}
	}
	if f.err == nil && c.redisson() {
		f.initRedisson()
	} else if f.err == nil {
		queue, timeouts := derivedKey("queue", name), derivedKey("qtimeout", name)
		f.keys = []string{name, fenceKey(name), queue, timeouts}
		f.relKeys = []string{name, queue, timeouts}
		f.channel = noticeChannel(name)
		lease, _ := f.leaseTime()
		f.leaseArg = leaseArg(lease)
		f.waitArg = leaseArg(f.wait)
	}
	return f
}

// Name returns the lock's name, which is also its Redis key.
func (f *FairMutex) Name() string { return f.name }

// check returns why a call on the handle cannot proceed, if it cannot.
func (f *FairMutex) check(ctx context.Context) error {
	if f.err != nil {
		return f.err
	}
	if ctx == nil {
		return invalid("nil context for lock %s", quote(f.name))
	}
	if f.c.closed() {
		return fmt.Errorf("dlock: lock %s: %w", quote(f.name), ErrClosed)
	}
	return nil
}

// leaseTime returns the lease of a new hold and whether the watchdog renews it.
func (f *FairMutex) leaseTime() (time.Duration, bool) {
	if f.lease > 0 {
		return f.lease, false
	}
	return f.c.cfg.watchdogTimeout, true
}

func (f *FairMutex) current() *hold {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h
}

// Lock acquires the lock when it is free and every waiter that came before
// has had its turn, waiting as long as it takes, until ctx ends (the error
// then matches ctx.Err()) or the Client closes (ErrClosed). It leaves the
// line when it fails. The hold is bound to ctx as a Mutex's is: when ctx
// ends, renewal stops and the lock is released. On a held handle Lock waits
// for Unlock, unless the handle is reentrant.
func (f *FairMutex) Lock(ctx context.Context) error {
	_, err := f.lock(ctx, 0, false)
	return err
}

// TryLock tries to acquire the lock for up to wait, in line with the other
// waiters: it returns (true, nil) when acquired and (false, nil), having left
// the line, when wait ran out. TryLock(ctx, 0) makes one attempt and does not
// queue; it fails while others wait in line even if the lock is free. Errors
// are as for Lock; a negative wait returns an error matching
// ErrInvalidArgument.
func (f *FairMutex) TryLock(ctx context.Context, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryLock wait must not be negative, got %v", wait)
	}
	return f.lock(ctx, wait, true)
}

func (f *FairMutex) lock(ctx context.Context, wait time.Duration, bounded bool) (bool, error) {
	if err := f.check(ctx); err != nil {
		return false, err
	}
	o := f.c.obs
	if o == nil {
		h, ok, err := f.lockOnce(ctx, wait, bounded)
		if h != nil {
			h.give()
		}
		return ok, err
	}
	start := time.Now()
	ctx = o.LockStart(ctx, f.name)
	h, ok, err := f.lockOnce(ctx, wait, bounded)
	e := LockEvent{Name: f.name, Outcome: lockOutcome(ok, err), Wait: time.Since(start), Err: err}
	switch {
	case h != nil:
		e.FencingToken = h.fence
	case ok:
		e.Outcome = Reentered
		e.FencingToken = f.FencingToken()
	}
	o.LockEnd(ctx, e)
	if h != nil {
		if cause := h.give(); cause != nil {
			o.HoldEnd(h.event(cause))
		}
	}
	return ok, err
}

// lockOnce is Lock and TryLock. It returns the new hold when it acquired
// one; ok without a hold is a reentrant handle's relock.
func (f *FairMutex) lockOnce(ctx context.Context, wait time.Duration, bounded bool) (*hold, bool, error) {
	if ctx.Err() != nil {
		return nil, false, ctxErr(ctx, "lock", f.name, nil)
	}
	var until time.Time
	if bounded {
		until = time.Now().Add(wait)
	}
	if f.reentrant {
		if ok, err, done := f.reenter(ctx); done {
			return nil, ok, err
		}
	}
	if ok, err := f.c.takeSlot(ctx, f.slot, "lock", f.name, bounded, until); !ok {
		return nil, false, err
	}
	h, err := f.acquire(ctx, wait, bounded, until)
	if h == nil {
		<-f.slot
		return nil, false, err
	}
	f.mu.Lock()
	h.count = 1
	f.h = h
	f.last = nil
	f.mu.Unlock()
	return h, true, nil
}

// reenter takes a reentrant handle's lock again while it is held (see
// Mutex.reenter): it confirms and extends the lease, then counts the hold.
func (f *FairMutex) reenter(ctx context.Context) (ok bool, err error, done bool) {
	h := f.current()
	if h == nil {
		return false, nil, false
	}
	if h.ended() {
		return false, endedHoldErr(h), true
	}
	lease, _ := f.leaseTime()
	start := f.c.w.now()
	var st int64
	if f.field != "" {
		st, start, err = f.reenterRedisson(ctx)
	} else {
		st, err = f.c.st.renewOne(ctx, f.name, h.token, lease)
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, ctxErr(ctx, "lock", f.name, err), true
		}
		return false, redisErr("lock (reentrant)", f.name, err), true
	}
	if st != 1 {
		f.c.w.loseHold(h, lossReason(st))
		return false, fmt.Errorf("dlock: lock %s (reentrant): %w", quote(f.name), h.why()), true
	}
	f.c.w.confirmed(h, start)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.h != h:
		return false, nil, false
	case h.ended():
		return false, endedHoldErr(h), true
	}
	h.count++
	return true, nil, true
}

// acquire queues for the lock and waits for its turn; it returns a nil hold
// and a nil error when a bounded wait ran out. The waiter's id in the queue
// is the token of the hold it will get, and notices addressed to that id
// wake it.
func (f *FairMutex) acquire(ctx context.Context, waitTime time.Duration, bounded bool, until time.Time) (*hold, error) {
	if f.field != "" {
		return f.acquireRedisson(ctx, waitTime, bounded, until)
	}
	c := f.c
	n, err := c.single("lock", f.name)
	if err != nil {
		return nil, err
	}
	lease, renew := f.leaseTime()
	h := c.newFamilyHold(ctx, fairOwnership, f.name, f.name)
	h.relKeys = f.relKeys // Unlock hands the lock to the next in line
	queue := "1"
	if bounded && !until.After(time.Now()) {
		queue = "0" // one attempt: do not join the line
	}
	pollCap := max(f.wait/3, time.Millisecond)
	var (
		fence   int64
		start   int64
		queued  bool // an attempt may have put us in the line
		unknown bool // an attempt may have granted the lock unseen
	)
	try := func(actx context.Context) (bool, time.Duration, error) {
		s := c.w.now()
		v, err := n.run(actx, fairAcquireScript, fairAcquireSource, f.keys, h.token, f.leaseArg, f.waitArg, queue)
		if err != nil {
			if x, ok := v.(int64); ok && x > 0 {
				unknown = true // granted, but WithReplicaAck was not satisfied
			} else if _, foreign := foreignKind(err); !foreign && mayHaveRun(err) {
				unknown, queued = true, queued || queue == "1"
			}
			return false, -1, err
		}
		x, ok := v.(int64)
		if !ok {
			return false, -1, fmt.Errorf("dlock: unexpected reply from fair_acquire script: %v", v)
		}
		if x > 0 {
			fence, start = x, s
			return true, 0, nil
		}
		queued = queued || queue == "1"
		hint := pttlHint(x)
		if hint < 0 || hint > pollCap {
			hint = pollCap // refresh our place in line in time
		}
		return false, hint, nil
	}
	ok, err := c.waitFor(ctx, wait{op: "lock", name: f.name, id: h.token, bounded: bounded, until: until}, try)
	if ok {
		return c.grant(ctx, h, fence, start, lease, renew)
	}
	if queued || unknown {
		f.leave(ctx, h.token, unknown, lease)
	}
	return nil, err
}

// leave takes the waiter id out of the line, deleting a grant it may have
// got unseen, and passes its turn on when it was first (fair_leave.lua). It
// is best effort, bounded by fairLeaveTimeout: the others skip a waiter left
// behind once its timeout has passed; a grant left behind is deleted by the
// watchdog in the background.
func (f *FairMutex) leave(ctx context.Context, id string, unknown bool, lease time.Duration) {
	c := f.c
	n, err := c.single("lock", f.name)
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(fairLeaveTimeout, c.cfg.closeTimeout))
	defer cancel()
	_, err = fairLeaveScript.Run(lctx, n.rdb, f.relKeys, id, c.pubArg, f.channel, f.name).Result()
	n.reroute(err)
	if err != nil {
		c.log.Debug("dlock: leaving the fair lock's line failed", "name", f.name, "error", err)
		if unknown {
			c.w.orphanAcquire(fairOwnership, f.name, id, lease)
		}
	}
}

// Unlock releases the lock with a token-checked delete and wakes the first
// waiter in line, by a notice addressed to it alone. It returns what
// Mutex.Unlock returns: nil when released (or when the hold's Lock context
// had ended it), ErrLockLost after a loss, ErrClosed after Client.Close,
// ErrNotHeld when the handle holds nothing; a reentrant handle counts down
// until its last Unlock.
func (f *FairMutex) Unlock(ctx context.Context) error {
	if f.err != nil {
		return f.err
	}
	if ctx == nil {
		return invalid("nil context for unlock %s", quote(f.name))
	}
	o := f.c.obs
	if o == nil {
		_, err := f.unlock(ctx)
		return err
	}
	ctx = o.UnlockStart(ctx, f.name)
	outcome, err := f.unlock(ctx)
	o.UnlockEnd(ctx, UnlockEvent{Name: f.name, Outcome: outcome, Err: err})
	return err
}

func (f *FairMutex) unlock(ctx context.Context) (UnlockOutcome, error) {
	f.mu.Lock()
	h := f.h
	if h == nil {
		f.mu.Unlock()
		if f.c.closed() {
			return WasEnded, fmt.Errorf("dlock: unlock %s: %w", quote(f.name), ErrClosed)
		}
		return NotHeld, fmt.Errorf("dlock: unlock %s: %w", quote(f.name), ErrNotHeld)
	}
	if h.count > 1 && !h.ended() {
		if f.field != "" {
			f.mu.Unlock()
			return f.countDown(ctx, h)
		}
		h.count--
		f.mu.Unlock()
		return CountedDown, nil
	}
	f.h = nil
	f.mu.Unlock()
	if f.field != "" {
		h.relArgs[3] = clientMillis() // Redisson's unlock drops stale waiters by the client's clock
	}

	outcome, err := f.c.release(ctx, h)

	f.mu.Lock()
	f.last = h.endErr()
	f.mu.Unlock()
	<-f.slot
	return outcome, err
}

// FencingToken returns the fencing token of the current hold, or 0 when the
// handle holds nothing (also once a hold is lost). Tokens strictly increase
// per name across all clients, and are shared with Mutex on the same name
// (WithRedissonCompat: with Redisson's RFencedLock, redisson_lock_token:{name}).
func (f *FairMutex) FencingToken() int64 {
	if h := f.current(); h != nil && h.held() {
		return h.fence
	}
	return 0
}

// Done returns a channel that is closed when the current hold ends: by
// Unlock, by loss, by the end of the Lock context, or by Client.Close. It is
// closed already when the handle holds nothing.
func (f *FairMutex) Done() <-chan struct{} {
	if h := f.current(); h != nil {
		return h.doneCh()
	}
	return closedChan
}

// Err returns why the current or last hold ended: nil while it is held and
// after a plain Unlock; an error matching ErrLockLost after a loss; ErrClosed
// after Client.Close; the Lock context's error (or cause) when that ended it.
func (f *FairMutex) Err() error {
	if f.err != nil {
		return f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h != nil {
		return f.h.endErr()
	}
	return f.last
}

// IsHeld reports whether the handle holds the lock with a lease confirmed
// until now (see Mutex.IsHeld).
func (f *FairMutex) IsHeld() bool {
	h := f.current()
	return h != nil && h.held()
}

// HoldCount returns how many times the handle holds the lock: 0 or 1, or more
// for a reentrant handle; 0 once the hold has ended.
func (f *FairMutex) HoldCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h == nil || !f.h.held() {
		return 0
	}
	return f.h.count
}

// WaitTimeout returns the handle's waiter timeout (WithFairWaitTimeout).
func (f *FairMutex) WaitTimeout() time.Duration { return f.wait }

// countDown is a reentrant Unlock that is not the last, WithRedissonCompat:
// the owner's hold count in Redis goes down with the handle's (Redisson
// keeps the count in the lock hash). If Redis cannot be reached the count is
// left as it is and the error returned; a hold found gone ends as lost.
func (f *FairMutex) countDown(ctx context.Context, h *hold) (UnlockOutcome, error) {
	st, err := f.countDownRedisson(ctx)
	if err != nil {
		return UnlockError, redisErr("unlock", f.name, err)
	}
	if st != 2 {
		why := lossReason(st)
		if st == 1 {
			why = "its hold count in Redis ran out before the handle's"
		}
		f.c.w.loseHold(h, why)
		h.awaitTold()
		f.mu.Lock()
		cleared := f.h == h
		if cleared {
			f.h, f.last = nil, h.endErr()
		}
		f.mu.Unlock()
		if cleared {
			<-f.slot // after a loss, one Unlock clears the handle
		}
		return WasLost, fmt.Errorf("dlock: unlock %s: %w", quote(f.name), h.why())
	}
	f.mu.Lock()
	if f.h == h && h.count > 1 {
		h.count--
	}
	f.mu.Unlock()
	return CountedDown, nil
}
