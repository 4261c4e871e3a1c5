package dlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// A hold is one acquisition of a lock: its token, fencing token and lease,
// and a context that ends when the hold ends, with the reason as its cause
// (ErrLockLost, ErrClosed, the Lock context's own cause, or errUnlocked).
type hold struct {
	c       *Client
	name    string
	relKeys []string // the release script's KEYS: lock, notice channel
	token   string
	fence   int64
	ctx     context.Context
	cancel  context.CancelCauseFunc // ends the hold with its reason
	// stopHook stops the hook that releases the lock when the Lock context
	// ends; guarded by the watchdog's mu, and called when the hold ends.
	stopHook func() bool
	// deadline is the local end of the lease, in nanoseconds since the
	// watchdog's epoch: the start of the last confirmed acquire or renewal
	// plus the lease, minus a margin for clock drift.
	deadline atomic.Int64
	// count is the reentrant hold count, guarded by the Mutex's mu.
	count int
	// ent is the watchdog's record, guarded by the watchdog's mu.
	ent entry
}

// held reports whether the hold is live and its lease is confirmed now. It
// reads the deadline itself, so a process that wakes from a long pause sees
// false before the watchdog has had a chance to run.
func (h *hold) held() bool {
	return h.ctx.Err() == nil && h.c.w.now() < h.deadline.Load()
}

// endErr is why the hold ended: nil while it lasts and after a plain Unlock.
func (h *hold) endErr() error {
	if h.ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(h.ctx)
	if errors.Is(cause, errUnlocked) {
		return nil
	}
	return cause
}

// lostErr builds the cause of a loss: ErrLockLost with the lock's name and why.
func lostErr(name, why string) error {
	return &lossError{name: name, why: why}
}

type lossError struct{ name, why string }

func (e *lossError) Error() string { return "dlock: lock " + quote(e.name) + " lost: " + e.why }

func (e *lossError) Unwrap() error { return ErrLockLost }

// leaseEnd returns the local deadline of a lease confirmed by a call sent at
// start (ns since epoch): the server may start the lease a little later, never
// earlier, so start + lease is safe up to the drift of the two clocks' rates,
// which the margin of 1% + 1ms covers.
func leaseEnd(start int64, lease time.Duration) int64 {
	return start + int64(lease-leaseMargin(lease))
}

// leaseMargin is how much earlier than the server a holder gives up its lease.
func leaseMargin(lease time.Duration) time.Duration {
	return min(lease/100+time.Millisecond, lease/2)
}
