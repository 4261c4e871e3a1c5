package dlock

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// A hold is one acquisition of a lock: its token, fencing token and lease,
// and how it ended (ErrLockLost, ErrClosed, the Lock context's cause, or
// errUnlocked), with a Done channel made only when someone asks for it.
type hold struct {
	c       *Client
	name    string
	relKeys []string // the release script's KEYS: lock, notice channel
	token   string
	fence   int64
	granted time.Time       // when the grant was confirmed
	lockCtx context.Context // the Lock context the hold is bound to
	args    [2]any          // the acquire script's ARGV: token, lease
	relArgs [4]any          // the release script's ARGV: token, how to announce, channel, notice
	nargs   int             // how many of relArgs the release script takes (3 or 4)
	own     *ownership      // what the hold owns in Redis; nil: a string key holding token

	endMu sync.Mutex
	over  atomic.Bool   // the hold has ended
	cause error         // why it ended; set once
	done  chan struct{} // made on the first Done call; closed when it ends
	onEnd func(error)   // called once when it ends (WithLock's cancel)
	given bool          // Lock returned it; the observer hears of its end only then
	told  chan struct{} // closed once announce has run for the end
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

// finish ends the hold with cause and tells whoever waits on it: Done, the
// WithLock context, the Client's observer. Later calls change nothing.
func (h *hold) finish(cause error) {
	if h.mark(cause) {
		h.announce(cause)
	}
}

// mark ends the hold with cause and closes Done; it reports whether this
// call ended it. It runs no callback, so it is safe under the watchdog's lock.
func (h *hold) mark(cause error) bool {
	h.endMu.Lock()
	defer h.endMu.Unlock()
	if h.cause != nil {
		return false
	}
	h.cause = cause
	h.over.Store(true)
	h.told = make(chan struct{})
	if h.done != nil {
		close(h.done)
	}
	return true
}

// awaitTold waits until the callbacks of an ended hold have run, so that
// Unlock reporting a loss never overtakes the observer hearing of it.
func (h *hold) awaitTold() {
	h.endMu.Lock()
	ch := h.told
	h.endMu.Unlock()
	if ch != nil {
		<-ch
	}
}

// announce runs the callbacks of an ended hold: WithLock's cancel and the
// observer. Call it once, after mark returned true, holding no lock.
func (h *hold) announce(cause error) {
	h.endMu.Lock()
	f := h.onEnd
	h.endMu.Unlock()
	if f != nil {
		f(cause)
	}
	h.endMu.Lock()
	given, told := h.given, h.told
	h.endMu.Unlock()
	if o := h.c.obs; o != nil && given {
		o.HoldEnd(h.event(cause))
	}
	close(told)
}

func (h *hold) event(cause error) HoldEvent {
	e := HoldEvent{Name: h.name, Held: time.Since(h.granted), Ending: holdEnding(cause)}
	if e.Ending != EndUnlocked {
		e.Cause = cause
	}
	return e
}

// give records that Lock returned the hold, so that the observer hears of
// its end, and returns the cause if it has ended already (the caller then
// reports that end itself, after the acquisition).
func (h *hold) give() error {
	h.endMu.Lock()
	defer h.endMu.Unlock()
	h.given = true
	return h.cause
}

// ended reports whether the hold is over, also when its Lock context has
// ended and the hook that finishes it has not run yet.
func (h *hold) ended() bool {
	return h.over.Load() || h.lockCtx.Err() != nil
}

// doneCh returns a channel closed when the hold ends.
func (h *hold) doneCh() <-chan struct{} {
	h.endMu.Lock()
	defer h.endMu.Unlock()
	if h.done == nil {
		if h.cause != nil {
			return closedChan
		}
		h.done = make(chan struct{})
	}
	return h.done
}

// notify makes f be called with the cause when the hold ends (at once if it
// has ended).
func (h *hold) notify(f func(error)) {
	h.endMu.Lock()
	if !h.over.Load() {
		h.onEnd = f
		h.endMu.Unlock()
		return
	}
	cause := h.cause
	h.endMu.Unlock()
	f(cause)
}

// held reports whether the hold is live and its lease is confirmed now. It
// reads the deadline itself, so a process that wakes from a long pause sees
// false before the watchdog has had a chance to run.
func (h *hold) held() bool {
	return !h.ended() && h.c.w.now() < h.deadline.Load()
}

// why is the hold's end cause, nil while it lasts (errUnlocked after Unlock).
func (h *hold) why() error {
	h.endMu.Lock()
	cause := h.cause
	h.endMu.Unlock()
	if cause == nil && h.lockCtx.Err() != nil {
		cause = context.Cause(h.lockCtx)
	}
	return cause
}

// endErr is why the hold ended: nil while it lasts and after a plain Unlock.
func (h *hold) endErr() error {
	cause := h.why()
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
	return after(start, lease-leaseMargin(lease))
}

// after returns t+d for times in nanoseconds since the watchdog's epoch,
// saturating instead of wrapping around for huge durations (a lease of
// hundreds of years must not end in the past).
func after(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}

// leaseMargin is how much earlier than the server a holder gives up its lease.
func leaseMargin(lease time.Duration) time.Duration {
	return min(lease/100+time.Millisecond, lease/2)
}
