package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The read-write lock's scripts (scripts/rw_*.lua).
var (
	rwRLockScript    = loadScript("rw_rlock")
	rwLockScript     = loadScript("rw_lock")
	rwWithdrawScript = loadScript("rw_withdraw")

	rwRLockSource    = scriptSource("rw_rlock")
	rwLockSource     = scriptSource("rw_lock")
	rwWithdrawSource = scriptSource("rw_withdraw")
)

const (
	// rwWriterMaxSleep caps a waiting writer's sleep between attempts, so that
	// it refreshes its intent well before the intent expires.
	rwWriterMaxSleep = 500 * time.Millisecond
	// rwIntentTTL is how long a waiting writer's intent outlives its last
	// attempt: four of its longest sleeps, so a slow round trip or a short
	// pause does not let readers overtake it, while the intent of a writer
	// that died keeps new readers out for at most this long.
	rwIntentTTL = 4 * rwWriterMaxSleep
)

// rwMode is what a handle of a read-write lock holds.
type rwMode uint8

const (
	rwNone rwMode = iota
	rwRead
	rwWrite
)

func (m rwMode) String() string {
	switch m {
	case rwRead:
		return "read"
	case rwWrite:
		return "write"
	default:
		return "no"
	}
}

// An RWMutex is a read-write lock on one name, shared by every process that
// uses that name on the same Redis (Redisson's RReadWriteLock). Any number of
// readers may hold it at once, or one writer alone. Get one from
// Client.NewRWMutex.
//
// A handle holds at most one hold at a time: one read hold (RLock) or the
// write hold (Lock). Goroutines sharing a handle exclude each other, as with a
// Mutex: RLock or Lock on a handle that holds either mode waits until the
// handle is unlocked. To hold several read locks in one process, use one
// handle per holder. With WithReentrant the handle is one owner instead:
// RLock on a handle that holds the read lock, or Lock on one that holds the
// write lock, succeeds at once and counts the hold, and the last RUnlock or
// Unlock releases it; asking a reentrant handle for the other mode (RLock
// while it holds the write lock, Lock while it holds the read lock) returns
// an error matching ErrInvalidArgument at once, since waiting for itself
// would never end. Redisson lets a writer take the read lock too (a
// downgrade); dlock does not, so that a handle's Done, Err and FencingToken
// always describe one hold.
//
// Writers are preferred: a writer that has to wait registers its intent, and
// while the intent of another writer lives, new readers wait (readers that
// already hold keep holding, and a reentrant RLock of a held read lock still
// counts up). The writer gets the lock as soon as the readers that held it
// have left, however many readers keep arriving. A waiting writer refreshes
// its intent on every attempt (it sleeps at most 500ms between attempts) and
// the intent expires on the server's clock 2s after its last refresh, so a
// writer that died or gave up keeps readers out for at most that long (one
// that gives up deletes its intent at once). Among writers there is no
// order, as with Mutex. Redisson's RReadWriteLock has no writer preference: a
// steady stream of readers there can starve a writer forever.
//
// Holds are kept alive by the Client's watchdog, as a Mutex's, unless
// WithLeaseTime gives them a fixed lease; every grant, read or write, carries
// a fencing token from the name's slot counter, so tokens of readers and
// writers of one name all increase together. Done and Err report how a hold
// ended: a reader whose entry was removed, or a writer whose key was deleted
// or overwritten, is reported lost (ErrLockLost) at its next renewal.
//
// In Redis, the write lock is the string key name holding the writer's token,
// exactly as a Mutex's key (so Mutex.Inspect and Mutex.ForceUnlock on the
// same name see and remove a writer); the readers are the sorted set
// dlock:readers:{T}:<name> (member: a reader's token, score: the end of its
// lease in server milliseconds), and a waiting writer's intent is the string
// dlock:wwait:{T}:<name>; all three share the name's hash slot. Do not lock a
// Mutex on the name of an RWMutex: a Mutex does not look at readers.
//
// On a Client WithRedissonCompat the lock is kept exactly as Redisson's
// RReadWriteLock keeps it, so that Java services using Redisson share it: the
// hash at the name with the field "mode" ("read" or "write"), the handle's
// owner field "<clientID>:go-<n>" holding its read hold count (or
// "<clientID>:go-<n>:write" its write hold count), one string
// "{<name>}:<owner field>:rwlock_timeout:<i>" per read hold, and wake-ups on
// redisson_rwlock:{<name>} ("0" after the last reader, "1" after a writer).
// Each handle is one owner (one Java thread, in Redisson's terms); a
// reentrant handle counts its holds in Redis, as Redisson does. There is no
// writer preference there (Redisson has none, and a Java reader would not
// honour a Go writer's intent), so a steady stream of readers can starve a
// writer, as in Redisson. Fencing tokens come from RFencedLock's counter
// redisson_lock_token:{<name>} (a plain INCR per grant): RReadWriteLock has
// no tokens, and a Java RFencedLock of the same name shares the counter.
// Mutex.Inspect and Mutex.ForceUnlock do not apply to this layout.
//
// RWMutex needs the commands of FamilyCommands on top of the Mutex's. It is
// not offered on a Redlock Client (NewRedlock): every call returns an error
// matching ErrInvalidArgument. All methods are safe for concurrent use. The
// zero value is not usable.
type RWMutex struct {
	c         *Client
	n         *node
	name      string
	readers   string   // the readers' sorted set
	intent    string   // a waiting writer's intent
	keys      []string // {name, readers, intent, fencing counter}: the acquire scripts' KEYS
	channel   string   // the notice channel of the name's hash slot
	leaseArg  any      // the lease in ms, formatted once
	lease     time.Duration
	reentrant bool
	err       error // set when the handle is invalid; returned by every call

	// rs is set on a Client WithRedissonCompat: the handle keeps Redisson's
	// layout (rwmutex_redisson.go). cmu then serialises a reentrant handle's
	// count changes, which are Redis calls.
	rs  *rwRedisson
	cmu sync.Mutex

	// slot is full from the start of a first RLock or Lock until its last
	// RUnlock or Unlock, so goroutines sharing the handle wait for each other.
	slot chan struct{}

	mu   sync.Mutex
	h    *hold  // the current hold, live or ended but not yet unlocked
	mode rwMode // what h holds
	last error  // how the previous hold ended, once unlocked
}

// NewRWMutex returns a handle on the read-write lock called name. It does not
// talk to Redis. WithLeaseTime and WithReentrant apply as they do to a Mutex.
// An empty name, a name in dlock's reserved prefix "dlock:", an invalid option
// or a Redlock Client does not panic: every call on the handle then returns an
// error matching ErrInvalidArgument.
func (c *Client) NewRWMutex(name string, opts ...MutexOption) *RWMutex {
	rw := &RWMutex{c: c, name: name, slot: make(chan struct{}, 1)}
	var m Mutex // the options are the Mutex's: read them off one
	for _, o := range opts {
		if o != nil {
			o(&m)
		}
	}
	rw.lease, rw.reentrant, rw.err = m.lease, m.reentrant, m.err
	switch {
	case c == nil:
		rw.err = invalid("NewRWMutex called on a nil *Client")
	case name == "":
		rw.err = invalid("read-write lock name is empty")
	case strings.HasPrefix(name, "dlock:"):
		rw.err = invalid("read-write lock name %s is in the prefix %q that dlock reserves for its own keys", quote(name), "dlock:")
	}
	if rw.err != nil {
		return rw
	}
	n, err := c.single("read-write lock", name)
	if err != nil {
		rw.err = err
		return rw
	}
	rw.n = n
	if c.redisson() {
		rw.initRedisson()
		rw.leaseArg = leaseArg(rw.leaseTimeOnly())
		return rw
	}
	rw.readers = derivedKey("readers", name)
	rw.intent = derivedKey("wwait", name)
	rw.keys = []string{name, rw.readers, rw.intent, fenceKey(name)}
	rw.channel = noticeChannel(name)
	rw.leaseArg = leaseArg(rw.leaseTimeOnly())
	return rw
}

// leaseTimeOnly is the lease of leaseTime.
func (rw *RWMutex) leaseTimeOnly() time.Duration {
	lease, _ := rw.leaseTime()
	return lease
}

// Name returns the lock's name, which is also the Redis key of its writer.
func (rw *RWMutex) Name() string { return rw.name }

// RLock acquires a read lock, waiting as long as it takes while a writer
// holds the lock or waits for it, until ctx ends (the error then matches
// ctx.Err()) or the Client closes (ErrClosed). The hold is bound to ctx, as a
// Mutex's: when ctx ends it is released and Done closes. A failed RLock
// leaves nothing held.
func (rw *RWMutex) RLock(ctx context.Context) error {
	_, err := rw.lock(ctx, rwRead, 0, false)
	return err
}

// TryRLock tries to acquire a read lock for up to wait: TryRLock(ctx, 0)
// makes one attempt. It returns (true, nil) when acquired and (false, nil)
// when wait ran out with a writer holding or waiting. Errors are as for RLock;
// a negative wait returns an error matching ErrInvalidArgument.
func (rw *RWMutex) TryRLock(ctx context.Context, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryRLock wait must not be negative, got %v", wait)
	}
	return rw.lock(ctx, rwRead, wait, true)
}

// Lock acquires the write lock, waiting as long as it takes while readers or
// another writer hold it, until ctx ends (the error then matches ctx.Err())
// or the Client closes (ErrClosed). While it waits, new readers wait behind
// it. The hold is bound to ctx, as a Mutex's. A failed Lock leaves nothing
// held and withdraws its intent.
func (rw *RWMutex) Lock(ctx context.Context) error {
	_, err := rw.lock(ctx, rwWrite, 0, false)
	return err
}

// TryLock tries to acquire the write lock for up to wait: TryLock(ctx, 0)
// makes one attempt. It returns (true, nil) when acquired and (false, nil)
// when wait ran out with the lock held by others. Errors are as for Lock; a
// negative wait returns an error matching ErrInvalidArgument.
func (rw *RWMutex) TryLock(ctx context.Context, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryLock wait must not be negative, got %v", wait)
	}
	return rw.lock(ctx, rwWrite, wait, true)
}

// RUnlock releases the handle's read lock (on a reentrant handle, it counts
// down until the last RUnlock). It returns what Mutex.Unlock returns in the
// same cases: nil when released (or when the hold had ended with its
// context), an error matching ErrLockLost after a loss, ErrClosed after
// Client.Close, and ErrNotHeld when the handle holds no read lock (also when
// it holds the write lock). A release that cannot reach Redis is retried in
// the background until the lease runs out.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.unlock(ctx, rwRead) }

// Unlock releases the handle's write lock (on a reentrant handle, it counts
// down until the last Unlock), with a token-checked delete. It returns as
// RUnlock does; ErrNotHeld when the handle holds no write lock.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.unlock(ctx, rwWrite) }

func (rw *RWMutex) current() (*hold, rwMode) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.h, rw.mode
}

// FencingToken returns the fencing token of the current hold, read or write,
// or 0 when the handle holds nothing (also once a hold is lost). Readers get
// tokens from the same counter as writers: a write that a storage accepted
// with a reader's token is rejected after a later writer's, and vice versa.
func (rw *RWMutex) FencingToken() int64 {
	if h, _ := rw.current(); h != nil && h.held() {
		return h.fence
	}
	return 0
}

// Done returns a channel that is closed when the current hold ends: by
// RUnlock or Unlock, by loss, by the end of its context, or by Client.Close.
// It is closed already when the handle holds nothing.
func (rw *RWMutex) Done() <-chan struct{} {
	if h, _ := rw.current(); h != nil {
		return h.doneCh()
	}
	return closedChan
}

// Err returns why the current or last hold ended: nil while it is held and
// after a plain RUnlock or Unlock; an error matching ErrLockLost after a
// loss; ErrClosed after Client.Close; the context's error (or cause) when
// that ended it.
func (rw *RWMutex) Err() error {
	if rw.err != nil {
		return rw.err
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.h != nil {
		return rw.h.endErr()
	}
	return rw.last
}

// IsReadHeld reports whether the handle holds the read lock with a lease
// confirmed until now.
func (rw *RWMutex) IsReadHeld() bool {
	h, mode := rw.current()
	return mode == rwRead && h != nil && h.held()
}

// IsWriteHeld reports whether the handle holds the write lock with a lease
// confirmed until now.
func (rw *RWMutex) IsWriteHeld() bool {
	h, mode := rw.current()
	return mode == rwWrite && h != nil && h.held()
}

// HoldCount returns how many times the handle holds its current mode: 0 or
// 1, or more for a reentrant handle; 0 once the hold has ended.
func (rw *RWMutex) HoldCount() int {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.h == nil || !rw.h.held() {
		return 0
	}
	return rw.h.count
}

// check returns why a call on the handle cannot proceed, if it cannot.
func (rw *RWMutex) check(ctx context.Context, op string) error {
	if rw.err != nil {
		return rw.err
	}
	if ctx == nil {
		return invalid("nil context for %s %s", op, quote(rw.name))
	}
	if rw.c.closed() {
		return fmt.Errorf("dlock: %s %s: %w", op, quote(rw.name), ErrClosed)
	}
	return nil
}

// leaseTime returns the lease of a new hold and whether the watchdog renews it.
func (rw *RWMutex) leaseTime() (time.Duration, bool) {
	if rw.lease > 0 {
		return rw.lease, false
	}
	return rw.c.cfg.watchdogTimeout, true
}

func opOf(mode rwMode) string {
	if mode == rwRead {
		return "rlock"
	}
	return "lock"
}

func (rw *RWMutex) lock(ctx context.Context, mode rwMode, wait time.Duration, bounded bool) (bool, error) {
	op := opOf(mode)
	if err := rw.check(ctx, op); err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		return false, ctxErr(ctx, op, rw.name, nil)
	}
	var until time.Time
	if bounded {
		until = time.Now().Add(wait)
	}
	if rw.reentrant {
		if ok, err, done := rw.reenter(ctx, mode); done {
			return ok, err
		}
	}
	if ok, err := rw.c.takeSlot(ctx, rw.slot, op, rw.name, bounded, until); !ok {
		return false, err
	}
	h, err := rw.acquire(ctx, mode, bounded, until)
	if h == nil {
		<-rw.slot
		return false, err
	}
	rw.mu.Lock()
	h.count = 1
	rw.h, rw.mode = h, mode
	rw.last = nil
	rw.mu.Unlock()
	return true, nil
}

// reenter counts up a reentrant handle's hold of mode, after confirming and
// extending its lease in Redis. done is false when the handle holds nothing,
// so the caller acquires as usual.
func (rw *RWMutex) reenter(ctx context.Context, mode rwMode) (ok bool, err error, done bool) {
	op := opOf(mode)
	h, held := rw.current()
	if h == nil {
		return false, nil, false
	}
	if held != mode {
		return false, invalid("%s %s (reentrant): the handle holds the %s lock; a handle holds one mode at a time, release it first",
			op, quote(rw.name), held), true
	}
	if h.ended() {
		return false, fmt.Errorf("dlock: %s %s: the handle's hold has ended, release it before locking again: %w",
			op, quote(rw.name), h.why()), true
	}
	if rw.rs != nil {
		rw.cmu.Lock()
		defer rw.cmu.Unlock()
		if cur, _ := rw.current(); cur != h {
			return false, nil, false // released meanwhile: acquire afresh
		}
		return rw.redissonReenter(ctx, h, mode)
	}
	lease, _ := rw.leaseTime()
	start := rw.c.w.now()
	var st int64
	if mode == rwWrite {
		st, err = rw.c.st.renewOne(ctx, rw.name, h.token, lease)
	} else {
		var v any
		if v, err = rw.n.run(ctx, memberOwnership.renew, memberOwnership.renewSrc, []string{rw.readers}, leaseArg(lease), h.token); err == nil {
			var sts []int64
			if sts, err = int64s(v, 1); err == nil {
				st = sts[0]
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, ctxErr(ctx, op, rw.name, err), true
		}
		return false, redisErr(op+" (reentrant)", rw.name, err), true
	}
	if st != 1 {
		rw.c.w.loseHold(h, lossReason(st))
		return false, fmt.Errorf("dlock: %s %s (reentrant): %w", op, quote(rw.name), h.why()), true
	}
	rw.c.w.confirmed(h, start)
	rw.mu.Lock()
	defer rw.mu.Unlock()
	switch {
	case rw.h != h:
		return false, nil, false // released meanwhile: acquire afresh
	case h.ended():
		return false, fmt.Errorf("dlock: %s %s: the handle's hold has ended, release it before locking again: %w",
			op, quote(rw.name), h.why()), true
	}
	h.count++
	return true, nil, true
}

// acquire runs the read or write acquire script until it grants the lock,
// waiting between attempts (waitFor); it returns a nil hold and a nil error
// when a bounded wait ran out. A writer that stops waiting without the lock
// withdraws its intent; an attempt whose outcome stayed unknown is cleaned up
// in the background, as a Mutex's.
func (rw *RWMutex) acquire(ctx context.Context, mode rwMode, bounded bool, until time.Time) (*hold, error) {
	c := rw.c
	lease, renew := rw.leaseTime()
	var (
		own    *ownership
		key    = rw.name
		script = rwLockScript
		src    = rwLockSource
	)
	if mode == rwRead {
		own, key, script, src = memberOwnership, rw.readers, rwRLockScript, rwRLockSource
	}
	var args []any
	if rw.rs != nil {
		var s *ownershipScript
		s, args = rw.redissonArgs(mode, false)
		own, key, script, src = s.own, rw.name, s.script, s.src
	}
	// One token for every attempt: a retry after a lost reply finds its own
	// token and is granted.
	h := c.newFamilyHold(ctx, own, rw.name, key)
	if rw.rs != nil {
		// Redisson's layout: the "token" of the hold is the owner's field
		// (see the ownership contract in ownership.go).
		h.token = args[1].(string)
		// The field is the handle's for every hold: a background release of
		// its previous hold must land before this acquire (watchdog.settle).
		if err := c.w.settle(ctx, key, h.token); err != nil {
			return nil, redisErr(opOf(mode), rw.name, err)
		}
		h.relArgs[0], h.relArgs[2] = h.token, rw.channel
	} else {
		args = []any{h.token, rw.leaseArg}
		if mode == rwWrite {
			args = append(args, leaseArg(rwIntentTTL))
		}
	}
	writerIntent := mode == rwWrite && rw.rs == nil // Redisson's layout has no writer preference
	var (
		fence   int64
		start   int64
		unknown bool // an attempt may have granted the lock
		intent  bool // an attempt may have registered a writer's intent
	)
	t := func(actx context.Context) (bool, time.Duration, error) {
		s := c.w.now()
		v, err := rw.n.run(actx, script, src, rw.keys, args...)
		if errors.Is(err, ErrNotReplicated) {
			// Granted, but too few replicas acknowledged: give it back (and
			// withdraw the intent) before answering, as a Mutex does.
			if f, ok := v.(int64); ok && f > 0 {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.closeTimeout)
				if _, rerr := c.st.release(rctx, h); rerr != nil {
					unknown = true
				}
				cancel()
			}
			intent = intent || writerIntent
			return false, -1, err
		}
		if err != nil {
			if mayHaveRun(err) {
				unknown, intent = true, intent || writerIntent
			}
			return false, -1, err
		}
		f, ok := v.(int64)
		if !ok {
			return false, -1, rwReplyError(fmt.Sprintf("dlock: unexpected reply from the %s script: %v", opOf(mode), v))
		}
		if f > 0 {
			fence, start = f, s
			return true, 0, nil
		}
		hint := pttlHint(f)
		if writerIntent {
			intent = true
			if hint < 0 || hint > rwWriterMaxSleep {
				hint = rwWriterMaxSleep // refresh the intent in time
			}
		}
		return false, hint, nil
	}
	ok, err := c.waitFor(ctx, wait{op: opOf(mode), name: rw.name, channel: rw.channel, bounded: bounded, until: until}, t)
	if !ok {
		// In Redisson's layout the "token" is the handle's owner field, the
		// same for its next acquisition: a background cleanup could remove
		// that next hold. A grant whose outcome stayed unknown is left to its
		// (unrenewed) lease there; the handle's next acquisition of the mode
		// counts it up, and its last release removes the field whatever its
		// count.
		if unknown && rw.rs == nil {
			c.w.orphanAcquire(own, key, h.token, lease)
		}
		if intent {
			rw.withdraw(ctx, h.token)
		}
		return nil, err
	}
	h, err = c.grant(ctx, h, fence, start, lease, renew)
	if err != nil {
		return nil, err
	}
	if mode == rwRead {
		c.n.pokeOn(rw.channel, rw.name) // the next local reader may go too
	}
	return h, nil
}

// withdraw deletes a writer's intent that is still token's and announces it,
// so readers waiting behind it go at once. If Redis cannot be reached, the
// delete is retried in the background (the intent expires by itself anyway).
func (rw *RWMutex) withdraw(ctx context.Context, token string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(rw.c.cfg.closeTimeout, time.Second))
	defer cancel()
	_, err := rw.n.run(wctx, rwWithdrawScript, rwWithdrawSource, []string{rw.intent},
		token, rw.c.pubArg, rw.channel, rw.name)
	if err != nil {
		rw.c.w.orphan(nil, rw.intent, token, rwIntentTTL)
	}
}

func (rw *RWMutex) unlock(ctx context.Context, mode rwMode) error {
	op := "runlock"
	if mode == rwWrite {
		op = "unlock"
	}
	if rw.err != nil {
		return rw.err
	}
	if ctx == nil {
		return invalid("nil context for %s %s", op, quote(rw.name))
	}
	if rw.rs != nil {
		rw.cmu.Lock()
		defer rw.cmu.Unlock()
	}
	rw.mu.Lock()
	h, held := rw.h, rw.mode
	if h == nil || held != mode {
		rw.mu.Unlock()
		if h != nil {
			return fmt.Errorf("dlock: %s %s: the handle holds the %s lock, not the %s lock: %w",
				op, quote(rw.name), held, mode, ErrNotHeld)
		}
		if rw.c.closed() {
			return fmt.Errorf("dlock: %s %s: %w", op, quote(rw.name), ErrClosed)
		}
		return fmt.Errorf("dlock: %s %s: the handle holds no %s lock: %w", op, quote(rw.name), mode, ErrNotHeld)
	}
	// A reentrant hold counts down; one that has ended is cleared at once,
	// whatever its count, so the handle is free for the next lock.
	if h.count > 1 && !h.ended() {
		if rw.rs == nil {
			h.count--
			rw.mu.Unlock()
			return nil
		}
		// Redisson's layout keeps the count in Redis: count it down there.
		rw.mu.Unlock()
		st, err := rw.redissonCountDown(ctx, h, mode)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctxErr(ctx, op, rw.name, err)
			}
			return redisErr(op, rw.name, err)
		case st == 2:
			rw.mu.Lock()
			h.count--
			rw.mu.Unlock()
			return nil
		case st == 1: // the server's count was lower: the hold is over
			if rw.c.w.unwatch(h) {
				h.finish(errUnlocked)
			}
			rw.mu.Lock()
			rw.h, rw.mode = nil, rwNone
			rw.last = h.endErr()
			rw.mu.Unlock()
			<-rw.slot
			return nil
		default:
			rw.c.w.loseHold(h, lossReason(st))
		}
		rw.mu.Lock()
	}
	rw.h, rw.mode = nil, rwNone
	rw.mu.Unlock()

	_, err := rw.c.release(ctx, h)

	rw.mu.Lock()
	rw.last = h.endErr()
	rw.mu.Unlock()
	<-rw.slot
	return err
}

// rwReplyError is a reply the scripts never give: permanent, as a Redis
// error is, so a wait does not retry it.
type rwReplyError string

func (e rwReplyError) Error() string { return string(e) }

// RedisError marks it as an answer from Redis (go-redis's redis.Error).
func (rwReplyError) RedisError() {}
