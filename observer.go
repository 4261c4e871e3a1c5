package dlock

import (
	"context"
	"errors"
	"time"
)

// An Observer watches a Client's locks, for metrics and tracing: install one
// with WithObserver (the dlockotel module provides an OpenTelemetry one).
//
// Methods are called synchronously where the event happens, from many
// goroutines at once: an implementation must be safe for concurrent use, fast,
// must not block, and must not call the Client. Embed NopObserver to
// implement only some methods and stay compatible as methods are added.
type Observer interface {
	// LockStart is called when Lock or TryLock (also inside WithLock)
	// begins. The context it returns is used for the call, so it may carry
	// a span; it must be ctx or derived from it.
	LockStart(ctx context.Context, name string) context.Context
	// LockEnd is called when that call returns, with the context
	// LockStart returned.
	LockEnd(ctx context.Context, e LockEvent)
	// UnlockStart is called when Unlock begins; see LockStart.
	UnlockStart(ctx context.Context, name string) context.Context
	// UnlockEnd is called when Unlock returns.
	UnlockEnd(ctx context.Context, e UnlockEvent)
	// HoldEnd is called once when a hold ends, however it ends.
	HoldEnd(e HoldEvent)
	// RenewalPass is called after each watchdog pass.
	RenewalPass(e PassEvent)
}

// LockOutcome is how a Lock or TryLock call ended.
type LockOutcome string

// Lock outcomes.
const (
	Acquired  LockOutcome = "acquired"  // the lock is held (or counted again, reentrant)
	Busy      LockOutcome = "busy"      // TryLock's wait ran out with the lock held by another
	Canceled  LockOutcome = "canceled"  // the context ended
	Closed    LockOutcome = "closed"    // the Client is closed
	Failed    LockOutcome = "failed"    // an error: Redis, foreign data, bad input
	Reentered LockOutcome = "reentered" // a reentrant handle counted one more hold
)

// LockEvent describes a finished Lock or TryLock call.
type LockEvent struct {
	Name         string
	Outcome      LockOutcome
	Wait         time.Duration // from the call to its return
	FencingToken int64         // of the hold, when acquired
	Err          error         // when Outcome is Canceled, Closed or Failed
}

// UnlockOutcome is how an Unlock call ended.
type UnlockOutcome string

// Unlock outcomes.
const (
	Released    UnlockOutcome = "released"     // the key was deleted
	CountedDown UnlockOutcome = "counted_down" // a reentrant hold was counted down
	WasLost     UnlockOutcome = "lost"         // the hold had been lost
	WasEnded    UnlockOutcome = "ended"        // the Lock context or Close had ended it
	NotHeld     UnlockOutcome = "not_held"     // the handle held nothing
	UnlockError UnlockOutcome = "error"        // Redis could not be reached (retried in the background)
)

// UnlockEvent describes a finished Unlock call.
type UnlockEvent struct {
	Name    string
	Outcome UnlockOutcome
	Err     error
}

// HoldEnding is why a hold ended.
type HoldEnding string

// Hold endings.
const (
	EndUnlocked HoldEnding = "unlocked" // Unlock
	EndLost     HoldEnding = "lost"     // the lease could not be confirmed
	EndContext  HoldEnding = "context"  // the Lock context ended
	EndClosed   HoldEnding = "closed"   // Client.Close
)

// HoldEvent describes a hold that ended.
type HoldEvent struct {
	Name   string
	Held   time.Duration // from the grant to the end
	Ending HoldEnding
	Cause  error // nil for EndUnlocked
}

// PassEvent describes one watchdog pass.
type PassEvent struct {
	Renewed  int           // renewals Redis confirmed
	Failed   int           // renewals that did not reach Redis or were refused
	Released int           // background releases sent
	Duration time.Duration // from sending to applying the answers
}

// NopObserver does nothing; embed it in an Observer that watches only some
// events.
type NopObserver struct{}

// LockStart returns ctx.
func (NopObserver) LockStart(ctx context.Context, _ string) context.Context { return ctx }

// LockEnd does nothing.
func (NopObserver) LockEnd(context.Context, LockEvent) {}

// UnlockStart returns ctx.
func (NopObserver) UnlockStart(ctx context.Context, _ string) context.Context { return ctx }

// UnlockEnd does nothing.
func (NopObserver) UnlockEnd(context.Context, UnlockEvent) {}

// HoldEnd does nothing.
func (NopObserver) HoldEnd(HoldEvent) {}

// RenewalPass does nothing.
func (NopObserver) RenewalPass(PassEvent) {}

// WithObserver installs o to watch the Client's locks; nil installs none.
func WithObserver(o Observer) Option {
	return func(c *config) { c.observer = o }
}

// lockOutcome classifies the result of a Lock or TryLock call.
func lockOutcome(ok bool, err error) LockOutcome {
	switch {
	case ok:
		return Acquired
	case err == nil:
		return Busy
	case errors.Is(err, ErrClosed):
		return Closed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	default:
		return Failed
	}
}

// holdEnding classifies a hold's end cause.
func holdEnding(cause error) HoldEnding {
	switch {
	case errors.Is(cause, errUnlocked):
		return EndUnlocked
	case errors.Is(cause, ErrLockLost):
		return EndLost
	case errors.Is(cause, ErrClosed):
		return EndClosed
	default:
		return EndContext
	}
}
