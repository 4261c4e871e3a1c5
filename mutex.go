package dlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A Mutex is a lock on one name, shared by every process that locks that name
// on the same Redis. Get one from Client.NewMutex.
//
// By default a Mutex behaves like a sync.Mutex across the fleet: while it is
// held, Lock from any goroutine, here or elsewhere, waits; goroutines sharing
// one handle exclude each other too. With WithReentrant, Lock on a handle that
// already holds the lock succeeds at once and counts the hold (Redisson's RLock);
// the handle is then one owner, so share it only within one logical owner.
//
// A hold taken without WithLeaseTime is kept alive by the Client's watchdog
// until Unlock, until the context given to Lock ends, or until its lease can no
// longer be confirmed. Done and Err report how a hold ended.
//
// All methods are safe for concurrent use. The zero value is not usable.
type Mutex struct {
	c         *Client
	name      string
	keys      []string      // {name, fencing counter}: the acquire script's KEYS
	relKeys   []string      // {name}: the release script's KEYS
	channel   string        // the notice channel of the name's hash slot (Redisson's, WithRedissonCompat)
	own       *ownership    // nil: a string holding a token; redissonLock: a field of Redisson's hash
	field     string        // WithRedissonCompat: the handle's owner field "<clientID>:go-<n>"
	leaseArg  any           // the lease in ms, formatted and boxed once
	lease     time.Duration // fixed lease, or 0: the watchdog's
	reentrant bool
	fairWait  time.Duration // WithFairWaitTimeout: refused by NewMutex, used by NewFairMutex
	err       error         // set when the handle is invalid; returned by every call

	// slot is full from the start of a first Lock until its last Unlock, so
	// goroutines sharing the handle wait for each other.
	slot chan struct{}

	mu   sync.Mutex
	h    *hold // the current hold, live or ended but not yet unlocked
	last error // how the previous hold ended, once unlocked
}

// A MutexOption configures a Mutex in Client.NewMutex.
type MutexOption func(*Mutex)

// WithLeaseTime gives every hold of the handle a fixed lease d that the
// watchdog does not renew (Redisson's tryLock(wait, lease)): the hold ends as
// lost when d has passed, unless it was unlocked before. Zero or negative makes
// every call on the handle fail with ErrInvalidArgument.
func WithLeaseTime(d time.Duration) MutexOption {
	return func(m *Mutex) {
		if d <= 0 {
			m.err = invalid("lease time must be positive, got %v", d)
		}
		m.lease = d
	}
}

// WithReentrant makes the handle reentrant, as Redisson's RLock: Lock on the
// handle while it holds the lock confirms and extends the lease in Redis and
// increments HoldCount, and only the Unlock that brings the count to zero
// releases the lock. The hold stays bound to the context of the first Lock.
func WithReentrant() MutexOption {
	return func(m *Mutex) { m.reentrant = true }
}

// NewMutex returns a handle on the lock called name. It does not talk to
// Redis. An empty name, a name starting with "dlock:fence:" (the fencing
// counters' keys) or an invalid option does not panic: every call on the
// handle then returns an error matching ErrInvalidArgument.
func (c *Client) NewMutex(name string, opts ...MutexOption) *Mutex {
	m := &Mutex{c: c, name: name, slot: make(chan struct{}, 1)}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	switch {
	case c == nil:
		m.err = invalid("NewMutex called on a nil *Client")
	case name == "":
		m.err = invalid("lock name is empty")
	case strings.HasPrefix(name, fencePrefix):
		m.err = invalid("lock name %s is in the prefix %q that dlock reserves for its fencing counters", quote(name), fencePrefix)
	case m.fairWait != 0 && m.err == nil:
		m.err = invalid("WithFairWaitTimeout applies to NewFairMutex only")
	}
	if m.err == nil {
		m.keys = []string{name, fenceKey(name)}
		m.relKeys = []string{name}
		m.channel = noticeChannel(name)
		if c.redisson() {
			m.keys[1] = redissonName("redisson_lock_token", name)
			m.channel = redissonName("redisson_lock__channel", name)
			m.own, m.field = redissonLock, c.newOwnerField()
		}
		lease, _ := m.leaseTime()
		m.leaseArg = leaseArg(lease)
	}
	return m
}

// Name returns the lock's name, which is also its Redis key.
func (m *Mutex) Name() string { return m.name }

// check returns why a call on the handle cannot proceed, if it cannot.
func (m *Mutex) check(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	if ctx == nil {
		return invalid("nil context for lock %s", quote(m.name))
	}
	if m.c.closed() {
		return fmt.Errorf("dlock: lock %s: %w", quote(m.name), ErrClosed)
	}
	return nil
}

// leaseTime returns the lease of a new hold and whether the watchdog renews it.
func (m *Mutex) leaseTime() (time.Duration, bool) {
	if m.lease > 0 {
		return m.lease, false
	}
	return m.c.cfg.watchdogTimeout, true
}

func (m *Mutex) current() *hold {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.h
}

// FencingToken returns the fencing token of the current hold, or 0 when the
// handle holds nothing (also once a hold is lost). Tokens strictly increase
// for every name across all clients: storage that remembers the largest token
// it accepted can reject a write from a holder whose lease ran out.
func (m *Mutex) FencingToken() int64 {
	if h := m.current(); h != nil && h.held() {
		return h.fence
	}
	return 0
}

// Done returns a channel that is closed when the current hold ends: by
// Unlock, by loss, by the end of the Lock context, or by Client.Close. It is
// closed already when the handle holds nothing.
func (m *Mutex) Done() <-chan struct{} {
	if h := m.current(); h != nil {
		return h.doneCh()
	}
	return closedChan
}

var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Err returns why the current or last hold ended: nil while it is held and
// after a plain Unlock; an error matching ErrLockLost after a loss; ErrClosed
// after Client.Close; the Lock context's error (or cause) when that ended it.
func (m *Mutex) Err() error {
	if m.err != nil {
		return m.err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h != nil {
		return m.h.endErr()
	}
	return m.last
}

// IsHeld reports whether the handle holds the lock with a lease confirmed
// until now. It reads the lease's deadline itself, so after a long pause it
// reports false at once, before the watchdog has noticed.
func (m *Mutex) IsHeld() bool {
	h := m.current()
	return h != nil && h.held()
}

// HoldCount returns how many times the handle holds the lock: 0 or 1, or more
// for a reentrant handle; 0 once the hold has ended.
func (m *Mutex) HoldCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil || !m.h.held() {
		return 0
	}
	return m.h.count
}
