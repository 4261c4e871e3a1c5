package dlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// A MultiMutex holds several locks as one (Redisson's RedissonMultiLock): all
// of its names or none. Get one from Client.NewMultiMutex.
//
// Each name is an ordinary lock (a Mutex's key, so a Mutex on one of the
// names excludes the MultiMutex and the other way round) with its own
// fencing token. Lock takes the names in one fixed order for every process:
// by hash slot, then by name. Two MultiMutexes over overlapping names
// therefore never wait for each other in a cycle, so they cannot deadlock;
// while it waits for a name, a MultiMutex keeps the names before it. A Lock
// that fails, or a TryLock whose wait runs out, gives back what it took.
//
// The watchdog renews every name. When any one of them is lost (its key
// stolen or expired, its renewal unconfirmed), the whole hold ends at once:
// Done closes, Err matches ErrLockLost and names the lock, and the other
// names are released in the background (token-checked). Unlock then returns
// that loss.
//
// Unlike Redisson's MultiLock, which tries all locks with a wait each and
// retries the whole set, a MultiMutex waits in order; and unlike it, a
// MultiMutex is not reentrant. Options apply to every name (WithLeaseTime;
// WithReentrant is refused). All methods are safe for concurrent use; the
// handle holds at most one hold at a time, and a second Lock waits for Unlock.
type MultiMutex struct {
	c     *Client
	names []string // in lock order
	ms    []*Mutex
	err   error

	slot chan struct{} // full while a hold (or an attempt) is live

	mu   sync.Mutex
	held *multiHold // the current hold, live or ended but not yet unlocked
}

// multiHold is one hold of a MultiMutex.
type multiHold struct {
	done  chan struct{}
	mu    sync.Mutex
	ended bool  // done is closed
	err   error // why it ended early (a loss); nil while it lasts
}

// end closes done with cause (nil for Unlock) unless it has ended already;
// it reports whether this call ended it.
func (mh *multiHold) end(cause error) bool {
	mh.mu.Lock()
	defer mh.mu.Unlock()
	if mh.ended {
		return false
	}
	mh.ended, mh.err = true, cause
	close(mh.done)
	return true
}

// NewMultiMutex returns a handle on the locks called names, all held together.
// It does not talk to Redis. No names, an empty or duplicate name, a name
// NewMutex refuses, or WithReentrant make every call on the handle return an
// error matching ErrInvalidArgument.
func (c *Client) NewMultiMutex(names []string, opts ...MutexOption) *MultiMutex {
	mm := &MultiMutex{c: c, slot: make(chan struct{}, 1)}
	switch {
	case c == nil:
		mm.err = invalid("NewMultiMutex called on a nil *Client")
		return mm
	case len(names) == 0:
		mm.err = invalid("NewMultiMutex needs at least one name")
		return mm
	}
	mm.names = slices.Clone(names)
	slices.SortFunc(mm.names, func(a, b string) int {
		if sa, sb := slotOf(a), slotOf(b); sa != sb {
			return int(sa) - int(sb)
		}
		return strings.Compare(a, b)
	})
	for i, n := range mm.names {
		if i > 0 && n == mm.names[i-1] {
			mm.err = invalid("NewMultiMutex: name %s is given twice", quote(n))
			return mm
		}
		m := c.NewMutex(n, opts...)
		if m.err == nil && m.reentrant {
			m.err = invalid("NewMultiMutex: WithReentrant is not supported")
		}
		if m.err != nil {
			mm.err = m.err
			return mm
		}
		mm.ms = append(mm.ms, m)
	}
	return mm
}

// Names returns the names in the order Lock takes them.
func (mm *MultiMutex) Names() []string { return slices.Clone(mm.names) }

// Lock takes every name, in order, waiting for each as Mutex.Lock does. The
// hold is bound to ctx as a Mutex's is. On an error, the names taken are
// released before Lock returns.
func (mm *MultiMutex) Lock(ctx context.Context) error {
	_, err := mm.lock(ctx, 0, false)
	return err
}

// TryLock is Lock with a bounded wait for the whole set: it returns false and
// a nil error, having released what it took, when wait runs out first.
func (mm *MultiMutex) TryLock(ctx context.Context, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryLock of %s: negative wait %v", mm.label(), wait)
	}
	return mm.lock(ctx, wait, true)
}

func (mm *MultiMutex) lock(ctx context.Context, wait time.Duration, bounded bool) (bool, error) {
	if mm.err != nil {
		return false, mm.err
	}
	if ctx == nil {
		return false, invalid("nil context for lock %s", mm.label())
	}
	until := time.Now().Add(wait)
	// One hold per handle: goroutines sharing it wait for each other first.
	select {
	case mm.slot <- struct{}{}:
	case <-ctx.Done():
		return false, ctxErr(ctx, "lock", mm.label(), nil)
	case <-mm.c.closing:
		return false, fmt.Errorf("dlock: lock %s: %w", quote(mm.label()), ErrClosed)
	}
	taken := 0
	giveBack := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mm.c.cfg.closeTimeout)
		defer cancel()
		for i := taken - 1; i >= 0; i-- {
			_ = mm.ms[i].Unlock(uctx)
		}
		<-mm.slot
	}
	for _, m := range mm.ms {
		var ok bool
		var err error
		if bounded {
			ok, err = m.TryLock(ctx, max(time.Until(until), 0))
		} else {
			err = m.Lock(ctx)
			ok = err == nil
		}
		if !ok || err != nil {
			giveBack()
			return false, err
		}
		taken++
	}
	mh := &multiHold{done: make(chan struct{})}
	mm.mu.Lock()
	mm.held = mh
	mm.mu.Unlock()
	for _, m := range mm.ms {
		h := m.current()
		h.notify(func(cause error) {
			if errors.Is(cause, ErrLockLost) {
				mm.lose(mh, cause)
			}
		})
	}
	return true, nil
}

// lose ends the hold mh because one of its names was lost: Done closes, and
// every other name still held is released in the background.
// (Ending the others calls lose again, through their notify callbacks: the
// first call wins.)
func (mm *MultiMutex) lose(mh *multiHold, cause error) {
	if !mh.end(cause) {
		return
	}
	for _, m := range mm.ms {
		if h := m.current(); h != nil {
			mm.c.w.abandon(h, lostErr(h.name, "another lock of its MultiMutex was lost"))
		}
	}
}

// Unlock releases every name, in reverse order. It returns an error matching
// ErrLockLost when the hold had been lost, ErrNotHeld when the handle holds
// nothing, and otherwise the errors of the names that could not be released
// (retried in the background, as Mutex.Unlock does).
func (mm *MultiMutex) Unlock(ctx context.Context) error {
	if mm.err != nil {
		return mm.err
	}
	if ctx == nil {
		return invalid("nil context for unlock %s", mm.label())
	}
	mm.mu.Lock()
	mh := mm.held
	mm.held = nil
	mm.mu.Unlock()
	if mh == nil {
		return fmt.Errorf("dlock: unlock %s: %w", quote(mm.label()), ErrNotHeld)
	}
	var errs []error
	for i := len(mm.ms) - 1; i >= 0; i-- {
		if err := mm.ms[i].Unlock(ctx); err != nil && !errors.Is(err, ErrLockLost) {
			errs = append(errs, err)
		}
	}
	mh.end(nil)
	<-mm.slot
	mh.mu.Lock()
	lost := mh.err
	mh.mu.Unlock()
	if lost == nil {
		// A loss found by Unlock itself (a key stolen since the last renewal).
		for _, m := range mm.ms {
			if err := m.Err(); errors.Is(err, ErrLockLost) {
				lost = err
				break
			}
		}
	}
	if lost != nil {
		errs = append([]error{lost}, errs...)
	}
	return errors.Join(errs...)
}

// FencingToken returns the fencing token of name in the current hold, or 0.
func (mm *MultiMutex) FencingToken(name string) int64 {
	for _, m := range mm.ms {
		if m.name == name {
			return m.FencingToken()
		}
	}
	return 0
}

// FencingTokens returns every name's fencing token in the current hold, or
// nil when nothing is held.
func (mm *MultiMutex) FencingTokens() map[string]int64 {
	if mm.current() == nil {
		return nil
	}
	out := make(map[string]int64, len(mm.ms))
	for _, m := range mm.ms {
		out[m.name] = m.FencingToken()
	}
	return out
}

func (mm *MultiMutex) current() *multiHold {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.held
}

// Done returns a channel closed when the current hold ends: by Unlock, by
// the loss of any one name, or by the end of the Lock context. Without a
// hold it returns a closed channel.
func (mm *MultiMutex) Done() <-chan struct{} {
	mh := mm.current()
	if mh == nil {
		return closedChan
	}
	for _, m := range mm.ms {
		if h := m.current(); h != nil && h.ended() && !errors.Is(h.why(), errUnlocked) {
			return closedChan // the Lock context ended: every name was released
		}
	}
	return mh.done
}

// Err returns why the current hold ended early: an error matching
// ErrLockLost (naming the lost lock), or the Lock context's cause; nil while
// it is held or when nothing is held.
func (mm *MultiMutex) Err() error {
	mh := mm.current()
	if mh == nil {
		return nil
	}
	mh.mu.Lock()
	err := mh.err
	mh.mu.Unlock()
	if err != nil {
		return err
	}
	for _, m := range mm.ms {
		if err := m.Err(); err != nil {
			return err
		}
	}
	return nil
}

// IsHeld reports whether every name is held with a confirmed lease now.
func (mm *MultiMutex) IsHeld() bool {
	if mm.current() == nil {
		return false
	}
	for _, m := range mm.ms {
		if !m.IsHeld() {
			return false
		}
	}
	return true
}

// label names the handle in messages.
func (mm *MultiMutex) label() string { return strings.Join(mm.names, "+") }
