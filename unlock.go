package dlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Unlock releases the lock with a token-checked delete: it never deletes a
// key that another holder's token holds. On a reentrant handle it only counts
// down until the last Unlock.
//
// It returns nil when the lock was released, and also when the hold had
// already ended because its Lock context ended (Unlock works whatever that
// context's state). It returns an error matching ErrLockLost when the hold
// was lost, ErrClosed when Client.Close ended it, and ErrNotHeld when the
// handle holds nothing. If Redis cannot be reached, renewal stops, the error
// is returned, and the delete is retried in the background until the lease
// runs out. In every case the handle is free for the next Lock afterwards:
// after a loss, one Unlock clears a reentrant handle whatever its count (later
// ones return ErrNotHeld).
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	if ctx == nil {
		return invalid("nil context for unlock %s", quote(m.name))
	}
	o := m.c.obs
	if o == nil {
		_, err := m.unlock(ctx)
		return err
	}
	ctx = o.UnlockStart(ctx, m.name)
	outcome, err := m.unlock(ctx)
	o.UnlockEnd(ctx, UnlockEvent{Name: m.name, Outcome: outcome, Err: err})
	return err
}

func (m *Mutex) unlock(ctx context.Context) (UnlockOutcome, error) {
	m.mu.Lock()
	h := m.h
	if h == nil {
		m.mu.Unlock()
		if m.c.closed() {
			return WasEnded, fmt.Errorf("dlock: unlock %s: %w", quote(m.name), ErrClosed)
		}
		return NotHeld, fmt.Errorf("dlock: unlock %s: %w", quote(m.name), ErrNotHeld)
	}
	// A reentrant hold counts down; one that has ended is cleared at once,
	// whatever its count, so the handle is free for the next Lock.
	if h.count > 1 && !h.ended() {
		h.count--
		m.mu.Unlock()
		if m.own == redissonLock {
			if err := m.c.redissonCountDown(ctx, h); err != nil {
				return UnlockError, err
			}
		}
		return CountedDown, nil
	}
	m.h = nil
	m.mu.Unlock()

	outcome, err := m.c.release(ctx, h)

	m.mu.Lock()
	m.last = h.endErr()
	m.mu.Unlock()
	<-m.slot
	return outcome, err
}

// endedErr is what Unlock returns for a hold that already ended: its loss,
// ErrClosed, or nil when the Lock context ended it (its key was released).
func endedErr(h *hold) error {
	err := h.endErr()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLockLost):
		return err
	case errors.Is(err, ErrClosed):
		return fmt.Errorf("dlock: unlock %s: %w", quote(h.name), ErrClosed)
	default:
		return nil
	}
}

// release ends a hold for Unlock and deletes its key if it is still ours.
func (c *Client) release(ctx context.Context, h *hold) (UnlockOutcome, error) {
	if !c.w.unwatch(h) {
		h.awaitTold()
		err := endedErr(h)
		if errors.Is(err, ErrLockLost) {
			return WasLost, err
		}
		return WasEnded, err
	}
	st, err := c.st.release(ctx, h)
	if err != nil {
		c.w.orphan(h.own, h.relKeys[0], h.token, h.ent.lease)
		h.finish(errUnlocked)
		return UnlockError, fmt.Errorf("%w (the delete is retried in the background until the lease runs out)",
			redisErr("unlock", h.name, err))
	}
	if st == 1 {
		h.finish(errUnlocked)
		if c.log.Enabled(ctx, slog.LevelDebug) {
			c.log.Debug("dlock: released", "name", h.name)
		}
		return Released, nil
	}
	cause := lostErr(h.name, lossReason(st))
	h.finish(cause)
	c.log.Warn("dlock: lock lost", "name", h.name, "reason", lossReason(st))
	return WasLost, cause
}
