package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The scripts of ExpirableSemaphore (psem_*.lua); its permits are renewed and
// released by memberOwnership's member_renew and member_release.
var (
	psemAcquireScript   = loadScript("psem_acquire")
	psemAcquireSource   = scriptSource("psem_acquire")
	psemAvailableScript = loadScript("psem_available")
)

// An ExpirableSemaphore is a semaphore whose permits have ids and leases:
// Redisson's RPermitExpirableSemaphore. Acquire hands out a Permit; only its
// id releases it, and a permit whose lease runs out goes back to the pool by
// itself, so a holder that crashes cannot keep permits forever. Get one from
// Client.NewExpirableSemaphore.
//
// A permit is held like a Mutex: with a lease of 0 the Client's watchdog
// renews it until Release, until the context given to Acquire ends, or until
// it can no longer be confirmed; with a fixed lease it ends when the lease
// runs out. Permit.Done and Permit.Err report how it ended (ErrLockLost when
// it expired or was removed). Every grant carries a fencing token.
//
// Layout (all keys in the name's hash slot): the key name is a string
// holding the total number of permits (set by TrySetPermits, changed by
// AddPermits); the permits taken are the members of the sorted set
// dlock:permits:{T}:<name>, member = the permit's id, score = its expiry in
// server milliseconds, with a key expiry at least as long as every lease.
// Redisson keeps the available count at name and adds expired permits back
// to it; keeping the total instead means an expired permit is free again as
// soon as its member is gone, and no count can drift.
//
// A semaphore whose permits were never set has none: Acquire waits until
// TrySetPermits or AddPermits adds some. A Release announces itself, so a
// waiter goes at once; an expired permit is noticed by waiters when the
// earliest lease ends (their sleep is capped by it).
//
// An ExpirableSemaphore is not supported on a Redlock Client (every call
// returns an error matching ErrInvalidArgument). All methods are safe for
// concurrent use.
type ExpirableSemaphore struct {
	c       *Client
	n       *node
	name    string
	keys    []string // {name, permits set, fencing counter}: the acquire script's KEYS
	setKeys []string // {name}
	avKeys  []string // {name, permits set}
	zkey    string   // the permits taken
	channel string
	err     error

	mu   sync.Mutex
	held map[string]*Permit // live permits of this handle, by id
}

// A Permit is one permit of an ExpirableSemaphore, held by the process that
// acquired it until Release, its lease's end, or the end of its Acquire
// context.
type Permit struct {
	s        *ExpirableSemaphore
	h        *hold
	released atomic.Bool
}

// NewExpirableSemaphore returns a handle on the expirable semaphore called
// name. It does not talk to Redis. An empty name, a name in dlock's reserved
// "dlock:fence:" prefix, a nil Client or a Redlock Client does not panic:
// every call on the handle then returns an error matching ErrInvalidArgument.
func (c *Client) NewExpirableSemaphore(name string) *ExpirableSemaphore {
	s := &ExpirableSemaphore{c: c, name: name, held: map[string]*Permit{}}
	s.n, s.err = c.familyStore("NewExpirableSemaphore", "semaphore", name)
	if s.err == nil {
		s.zkey = derivedKey("permits", name)
		s.keys = []string{name, s.zkey, fenceKey(name)}
		s.setKeys = []string{name}
		s.avKeys = []string{name, s.zkey}
		s.channel = noticeChannel(name)
	}
	return s
}

// Name returns the semaphore's name, which is also the Redis key holding its
// total of permits.
func (s *ExpirableSemaphore) Name() string { return s.name }

// TrySetPermits sets the total number of permits to n, only if it was never
// set (the key is absent), and reports whether it did. Waiters are woken. n
// may be 0; a negative n returns an error matching ErrInvalidArgument.
func (s *ExpirableSemaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	return semSet(ctx, s.c, s.n, s.err, s.name, s.setKeys, s.channel, n)
}

// AddPermits adds n permits to the total, or removes -n when n is negative
// (permits taken stay taken: the total may drop below them, and acquirers
// wait until enough are released). Adding permits wakes waiters.
func (s *ExpirableSemaphore) AddPermits(ctx context.Context, n int) error {
	if err := familyCheck(ctx, s.c, s.err, "add permits to", s.name); err != nil {
		return err
	}
	_, err := semAdd(ctx, s.c, s.n, "add permits to", s.name, s.setKeys, s.channel, n)
	return err
}

// Acquire takes one permit, waiting as long as it takes, until ctx ends (the
// error then matches ctx.Err()) or the Client closes (ErrClosed). With lease
// 0 the watchdog renews the permit until Release, or until ctx ends; with a
// positive lease the permit ends when the lease runs out, unless released
// before. Either way the permit is bound to ctx: when ctx ends it is
// released. A negative lease returns an error matching ErrInvalidArgument.
func (s *ExpirableSemaphore) Acquire(ctx context.Context, lease time.Duration) (*Permit, error) {
	return s.acquire(ctx, 0, false, lease)
}

// TryAcquire tries to take one permit for up to wait: TryAcquire(ctx, 0,
// lease) makes one attempt. It returns (nil, nil) when wait ran out with
// every permit taken. lease is as for Acquire. A negative wait or lease
// returns an error matching ErrInvalidArgument.
func (s *ExpirableSemaphore) TryAcquire(ctx context.Context, wait, lease time.Duration) (*Permit, error) {
	if wait < 0 {
		return nil, invalid("TryAcquire wait must not be negative, got %v", wait)
	}
	return s.acquire(ctx, wait, true, lease)
}

func (s *ExpirableSemaphore) acquire(ctx context.Context, d time.Duration, bounded bool, lease time.Duration) (*Permit, error) {
	if err := familyCheck(ctx, s.c, s.err, "acquire", s.name); err != nil {
		return nil, err
	}
	if lease < 0 {
		return nil, invalid("permit lease must not be negative (0: renewed by the watchdog), got %v", lease)
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx, "acquire", s.name, nil)
	}
	c := s.c
	renew := lease == 0
	if renew {
		lease = c.cfg.watchdogTimeout
	}
	w := wait{op: "acquire", name: s.name, bounded: bounded}
	if bounded {
		w.until = time.Now().Add(d)
	}
	// One id for every attempt of this call: a retry after a lost reply finds
	// its own permit and is granted (psem_acquire.lua).
	h := c.newFamilyHold(ctx, memberOwnership, s.name, s.zkey)
	leaseMs := leaseArg(lease)
	var (
		start   int64
		fence   int64
		free    int64 // permits still free after the grant
		unknown bool  // an attempt may have taken the permit
	)
	ok, err := c.waitFor(ctx, w, func(actx context.Context) (bool, time.Duration, error) {
		start = c.w.now()
		v, err := s.n.run(actx, psemAcquireScript, psemAcquireSource, s.keys, h.token, leaseMs)
		if err != nil && !errors.Is(err, ErrNotReplicated) {
			if kind, ok := foreignKind(err); ok {
				return false, -1, countWrongType(s.name, kind, "permit count")
			}
			unknown = unknown || mayHaveRun(err)
			return false, -1, err
		}
		r, perr := psemReply(v)
		if perr != nil {
			return false, -1, perr
		}
		if err != nil { // granted, but not acknowledged by enough replicas: give it back
			if r[0] == 1 {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.closeTimeout)
				defer cancel()
				if _, rerr := c.st.release(rctx, h); rerr != nil {
					unknown = true
				}
			}
			return false, -1, err
		}
		if r[0] != 1 {
			hint := time.Duration(-1)
			if r[1] >= 0 {
				hint = time.Duration(r[1]) * time.Millisecond
			}
			return false, hint, nil
		}
		fence, free = r[1], r[2]
		return true, 0, nil
	})
	if ok && free > 0 {
		c.n.poke(s.name) // permits left (several added at once): the next local waiter may take one
	}
	if !ok {
		if unknown {
			c.w.orphanAcquire(memberOwnership, s.zkey, h.token, lease)
		}
		return nil, err
	}
	if _, err := c.grant(ctx, h, fence, start, lease, renew); err != nil {
		return nil, err
	}
	p := &Permit{s: s, h: h}
	id := h.token
	s.mu.Lock()
	s.held[id] = p
	s.mu.Unlock()
	h.notify(func(error) { // however it ends, the handle forgets it
		s.mu.Lock()
		if s.held[id] == p {
			delete(s.held, id)
		}
		s.mu.Unlock()
	})
	return p, nil
}

// psemReply reads psem_acquire's reply: {1, fencing token, permits free}
// or {0, hint in ms}, padded to three.
func psemReply(v any) ([3]int64, error) {
	var r [3]int64
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 || len(arr) > 3 {
		return r, unexpected("psem_acquire", v)
	}
	for i, x := range arr {
		if r[i], ok = x.(int64); !ok {
			return r, unexpected("psem_acquire", v)
		}
	}
	return r, nil
}

// Release releases the permit with id. A permit this handle acquired is
// released as by Permit.Release. Any other id is released in Redis if a
// permit with that id is taken there (only the id releases a permit, so
// another process may release a permit whose id it was handed), without
// telling its holder, whose watchdog finds it gone at its next renewal. An
// id that is not taken (unknown, released, or expired) returns an error
// matching ErrNotHeld; an empty id an error matching ErrInvalidArgument.
func (s *ExpirableSemaphore) Release(ctx context.Context, id string) error {
	if err := familyCheck(ctx, s.c, s.err, "release a permit of", s.name); err != nil {
		return err
	}
	if id == "" {
		return invalid("permit id is empty (semaphore %s)", quote(s.name))
	}
	s.mu.Lock()
	p := s.held[id]
	s.mu.Unlock()
	if p != nil {
		return p.Release(ctx)
	}
	st, err := memberOwnership.release.Run(ctx, s.n.rdb, []string{s.zkey}, id, s.c.pubArg, s.channel, s.name).Int64()
	if err != nil {
		s.n.reroute(err)
		return redisErr("release a permit of", s.name, err)
	}
	switch st {
	case 1:
		return nil
	case -2:
		return fmt.Errorf("%w: key %s of semaphore %s does not hold its permits", ErrWrongType, quote(s.zkey), quote(s.name))
	default:
		return fmt.Errorf("dlock: release permit %s of semaphore %s: no such permit is taken (unknown, released or expired): %w",
			quote(id), quote(s.name), ErrNotHeld)
	}
}

// Available returns the number of permits free now: the total less the
// permits whose lease still runs. It is 0 when the permits were never set,
// and negative when AddPermits lowered the total below the permits taken.
func (s *ExpirableSemaphore) Available(ctx context.Context) (int, error) {
	if err := familyCheck(ctx, s.c, s.err, "read permits of", s.name); err != nil {
		return 0, err
	}
	v, err := psemAvailableScript.Run(ctx, s.n.rdb, s.avKeys).Int64()
	if err != nil {
		s.n.reroute(err)
		return 0, countErr("read permits of", s.name, "permit count", err)
	}
	return int(v), nil
}

// ID returns the permit's id: a fresh UUID v4, the member in Redis, and what
// ExpirableSemaphore.Release takes.
func (p *Permit) ID() string { return p.h.token }

// Done returns a channel that is closed when the permit ends: by Release, by
// loss (its lease ran out, or it was removed), by the end of its Acquire
// context, or by Client.Close.
func (p *Permit) Done() <-chan struct{} { return p.h.doneCh() }

// Err returns why the permit ended: nil while it is held and after a plain
// Release; an error matching ErrLockLost after a loss; ErrClosed after
// Client.Close; the Acquire context's error (or cause) when that ended it.
func (p *Permit) Err() error { return p.h.endErr() }

// IsHeld reports whether the permit is held with a lease confirmed until now.
func (p *Permit) IsHeld() bool { return p.h.held() }

// FencingToken returns the permit's fencing token while it is held, 0 once it
// has ended. Tokens strictly increase across every grant in the semaphore's
// hash slot (permits and locks). Since several permits are valid at once, a
// store cannot simply refuse tokens below the largest it saw; the token
// orders grants and tells a stale holder from a later one of the same work.
func (p *Permit) FencingToken() int64 {
	if p.h.held() {
		return p.h.fence
	}
	return 0
}

// Release gives the permit back and wakes a waiter. It returns nil when the
// permit was released, and also when its Acquire context had ended it (it was
// released then). When the permit had expired or was removed, the error
// matches ErrLockLost and ErrNotHeld; after Client.Close, ErrClosed; a second
// Release returns an error matching ErrNotHeld. If Redis cannot be reached,
// the error is returned and the release is retried in the background until
// the lease runs out.
func (p *Permit) Release(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context for releasing a permit of %s", quote(p.s.name))
	}
	if !p.released.CompareAndSwap(false, true) {
		return fmt.Errorf("dlock: release permit %s of semaphore %s: released already: %w",
			quote(p.ID()), quote(p.s.name), ErrNotHeld)
	}
	outcome, err := p.s.c.release(ctx, p.h)
	if outcome == WasLost {
		return fmt.Errorf("dlock: release permit %s of semaphore %s: %w: %w", quote(p.ID()), quote(p.s.name), ErrNotHeld, err)
	}
	return err
}
