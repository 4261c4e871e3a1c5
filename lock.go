package dlock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Lock acquires the lock, waiting as long as it takes, until ctx ends (the
// error then matches ctx.Err() with errors.Is) or the Client closes
// (ErrClosed). Transient Redis errors are retried while it waits.
//
// The hold is bound to ctx: when ctx ends, renewal stops and the lock is
// released, and Done closes. To wait for a limited time but hold for longer,
// use TryLock. On a held handle Lock waits for Unlock, as sync.Mutex does,
// unless the handle is reentrant. A failed Lock leaves nothing held.
func (m *Mutex) Lock(ctx context.Context) error {
	_, err := m.lock(ctx, 0, false)
	return err
}

// TryLock tries to acquire the lock for up to wait: TryLock(ctx, 0) makes one
// attempt. It returns (true, nil) when acquired and (false, nil) when wait ran
// out with the lock held by another. It returns an error when ctx ends, when
// the Client closes, on a permanent Redis error, or when the last attempt
// failed with a transient one. The hold is bound to ctx, as with Lock; a
// negative wait returns an error matching ErrInvalidArgument.
func (m *Mutex) TryLock(ctx context.Context, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryLock wait must not be negative, got %v", wait)
	}
	return m.lock(ctx, wait, true)
}

func (m *Mutex) lock(ctx context.Context, wait time.Duration, bounded bool) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	o := m.c.obs
	if o == nil {
		h, ok, err := m.lockOnce(ctx, wait, bounded)
		if h != nil {
			h.give()
		}
		return ok, err
	}
	start := time.Now()
	ctx = o.LockStart(ctx, m.name)
	h, ok, err := m.lockOnce(ctx, wait, bounded)
	e := LockEvent{Name: m.name, Outcome: lockOutcome(ok, err), Wait: time.Since(start), Err: err}
	switch {
	case h != nil:
		e.FencingToken = h.fence
	case ok:
		e.Outcome = Reentered
		e.FencingToken = m.FencingToken()
	}
	o.LockEnd(ctx, e)
	if h != nil {
		if cause := h.give(); cause != nil { // ended before it was reported
			o.HoldEnd(h.event(cause))
		}
	}
	return ok, err
}

// lockOnce is Lock and TryLock. It returns the new hold when it acquired
// one; ok without a hold is a reentrant handle's relock.
func (m *Mutex) lockOnce(ctx context.Context, wait time.Duration, bounded bool) (h *hold, ok bool, err error) {
	if ctx.Err() != nil {
		return nil, false, ctxErr(ctx, "lock", m.name, nil)
	}
	var until time.Time
	if bounded {
		until = time.Now().Add(wait)
	}
	if m.reentrant {
		if ok, err, done := m.reenter(ctx); done {
			return nil, ok, err
		}
	}
	if ok, err := m.c.takeSlot(ctx, m.slot, "lock", m.name, bounded, until); !ok {
		return nil, false, err
	}
	h, err = m.c.acquire(ctx, m, bounded, until)
	if h == nil {
		<-m.slot
		return nil, false, err
	}
	m.mu.Lock()
	h.count = 1
	m.h = h
	m.last = nil
	m.mu.Unlock()
	return h, true, nil
}

// reenter takes a reentrant handle's lock again while it is held: it confirms
// and extends the lease in Redis, then counts the hold. done is false when the
// handle holds nothing, so the caller acquires as usual.
func (m *Mutex) reenter(ctx context.Context) (ok bool, err error, done bool) {
	h := m.current()
	if h == nil {
		return false, nil, false
	}
	if h.ended() {
		return false, endedHoldErr(h), true
	}
	start := m.c.w.now()
	var st int64
	if m.own == redissonLock {
		// Redisson counts a reentry in its hash: the acquire script again.
		if st, err = m.c.st.acquire(ctx, m, h); err == nil && st > 0 {
			st = 1
		}
	} else {
		st, err = m.c.st.renewOne(ctx, m.name, h.token, h.ent.lease)
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, ctxErr(ctx, "lock", m.name, err), true
		}
		return false, redisErr("lock (reentrant)", m.name, err), true
	}
	if st != 1 {
		m.c.w.loseHold(h, lossReason(st))
		return false, fmt.Errorf("dlock: lock %s (reentrant): %w", quote(m.name), h.why()), true
	}
	m.c.w.confirmed(h, start)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.h != h:
		return false, nil, false // unlocked meanwhile: acquire afresh
	case h.ended():
		return false, endedHoldErr(h), true // ended meanwhile
	}
	h.count++
	return true, nil, true
}

// endedHoldErr is what Lock on a reentrant handle returns while the handle
// still has a hold that ended (lost, or its Lock context ended) and that no
// Unlock has cleared yet.
func endedHoldErr(h *hold) error {
	return fmt.Errorf("dlock: lock %s: the handle's hold has ended, Unlock it before locking again: %w",
		quote(h.name), h.why())
}

// acquire runs the acquire script until it grants the lock, waiting between
// attempts; it returns a nil hold and a nil error when a bounded wait ran out.
// Each sleep is the next backoff step, capped by the holder's remaining lease
// (the PTTL the script returns) and by the time left.
func (c *Client) acquire(ctx context.Context, m *Mutex, bounded bool, until time.Time) (*hold, error) {
	lease, renew := m.leaseTime()
	// One token for every attempt of this call: a retry after a lost reply
	// finds its own token and is granted (acquire.lua). If an attempt's outcome
	// stays unknown when the call gives up, the token is deleted in the
	// background, so an orphan does not block others for a whole lease.
	token := newToken()
	if m.field != "" {
		token = m.field // Redisson's layout: the owner's field, the same for every hold
		if err := c.w.settle(ctx, m.name, token); err != nil {
			return nil, redisErr("lock", m.name, err)
		}
	}
	h := &hold{c: c, name: m.name, relKeys: m.relKeys, token: token, lockCtx: ctx, own: m.own}
	h.args = [2]any{token, m.leaseArg} // boxed once, used by every attempt
	h.relArgs, h.nargs = [4]any{h.args[0], c.pubArg, m.channel}, 3
	var (
		bo      backoff.BackOff
		t       *time.Timer
		lastErr error
		unknown bool    // an attempt may have set the key
		sub     *waiter // subscribed to release notices of the name
		joined  bool    // tried to subscribe
	)
	defer func() {
		if t != nil {
			t.Stop()
		}
		if sub != nil {
			c.n.leave(sub)
		}
	}()
	if c.n != nil {
		// On a contended slot, wait in line for notices before the first
		// attempt: a release during it is then announced to this call.
		if sub = c.n.joinIfReadyOn(m.channel, m.name); sub != nil {
			joined = true
		}
	}
	giveUp := func(err error) (*hold, error) {
		if unknown {
			c.w.orphanAcquire(m.own, m.name, token, lease)
		}
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		start := c.w.now()
		actx, cancelAttempt := ctx, context.CancelFunc(nil)
		if bounded && attempt > 0 {
			// A retry does not run past the wait (with a client that honours
			// context deadlines); the first attempt always completes.
			actx, cancelAttempt = context.WithDeadline(ctx, until)
		}
		v, err := c.st.acquire(actx, m, h)
		if cancelAttempt != nil {
			cancelAttempt()
		}
		pttl := time.Duration(-1) // unknown, or the key has no expiry
		if err == nil {
			if v > 0 {
				return c.grant(ctx, h, v, start, lease, renew)
			}
			lastErr = nil
			if ms := -1 - v; ms >= 0 {
				pttl = time.Duration(ms) * time.Millisecond
			}
		} else if kind, ok := foreignKind(err); ok {
			return giveUp(wrongType(m.name, kind))
		} else {
			unknown = unknown || mayHaveRun(err)
			if ctx.Err() != nil {
				if lastErr != nil && errors.Is(err, ctx.Err()) {
					err = lastErr // the context only cut the attempt: report why earlier ones failed
				}
				return giveUp(ctxErr(ctx, "lock", m.name, err))
			}
			if actx != ctx && errors.Is(actx.Err(), context.DeadlineExceeded) {
				// The wait ended during this retry: time ran out; the last
				// Redis error, if any, is the one reported.
				return giveUp(timeUp(m.name, lastErr))
			}
			if !isTransient(err) {
				return giveUp(redisErr("lock", m.name, err))
			}
			lastErr = err
			c.log.Debug("dlock: acquire failed, retrying", "name", m.name, "error", err)
		}

		left := time.Duration(math.MaxInt64)
		if bounded {
			if left = time.Until(until); left <= 0 {
				return giveUp(timeUp(m.name, lastErr))
			}
		}
		// Before the second attempt, subscribe to the name's release notices:
		// a release between the first attempt and the subscription is then
		// seen by the second attempt, and any later one is announced.
		if !joined && lastErr == nil && c.n != nil {
			joined = true
			if sub = c.n.joinOn(ctx, m.channel, m.name, "", left); sub != nil {
				continue
			}
		}
		var woken <-chan struct{}
		if sub != nil {
			woken = sub.ch
		}
		if bo == nil {
			if bo = c.cfg.backOff(); bo == nil {
				bo = DefaultBackOff()
			}
		}
		d := bo.NextBackOff()
		if d < 0 { // backoff.Stop, or a broken BackOff
			d = DefaultBackOffMax
		}
		if pttl >= 0 && pttl < d {
			d = pttl
		}
		d = min(d, left)
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-woken:
			if c.n.dropped(sub) { // the slot moved: subscribe again, on its new node
				c.n.leave(sub)
				sub, joined = nil, false
			}
		case <-ctx.Done():
			return giveUp(ctxErr(ctx, "lock", m.name, lastErr))
		case <-c.closing:
			return giveUp(fmt.Errorf("dlock: lock %s: %w", quote(m.name), ErrClosed))
		}
	}
}

// timeUp is what a bounded wait returns when its time runs out: nil, or the
// last attempt's transient Redis error.
func timeUp(name string, lastErr error) error {
	if lastErr != nil {
		return redisErr("lock", name, lastErr)
	}
	return nil
}

// mayHaveRun reports whether a command that failed with err may still have
// reached Redis and run: not when Redis answered with an error, nor when no
// connection was made.
func mayHaveRun(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return false
	}
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
}

// grant turns a granted acquire into a watched hold bound to ctx.
func (c *Client) grant(ctx context.Context, h *hold, fence, start int64, lease time.Duration, renew bool) (*hold, error) {
	h.fence = fence
	h.granted = time.Now()
	if err := c.w.watch(h, start, lease, renew); err != nil {
		h.finish(ErrClosed)
		rctx, cancel := context.WithTimeout(context.Background(), c.cfg.closeTimeout)
		defer cancel()
		_, _ = c.st.release(rctx, h)
		return nil, fmt.Errorf("dlock: lock %s: %w", quote(h.name), ErrClosed)
	}
	if ctx.Done() != nil {
		c.w.hook(h, context.AfterFunc(ctx, func() { c.w.released(h) }))
	}
	if ctx.Err() != nil { // ended as it was granted: the hook above releases it
		return nil, ctxErr(ctx, "lock", h.name, nil)
	}
	if c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.Debug("dlock: acquired", "name", h.name, "fencing_token", fence)
	}
	return h, nil
}

// newToken returns a fresh random token: a UUID v4 from crypto/rand.
func newToken() string {
	var u uuid.UUID
	_, _ = rand.Read(u[:])  // never fails: crypto/rand crashes the program instead
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// ctxErr reports that ctx ended during op on name. It matches ctx.Err() and
// the context's cause with errors.Is, and last, the last Redis error seen.
func ctxErr(ctx context.Context, op, name string, last error) error {
	err := ctx.Err()
	var errs []error
	if cause := context.Cause(ctx); cause != nil && cause != err {
		errs = append(errs, cause)
	}
	if last != nil && !errors.Is(last, err) {
		errs = append(errs, last)
	}
	if len(errs) == 0 {
		return fmt.Errorf("dlock: %s %s: %w", op, quote(name), err)
	}
	return fmt.Errorf("dlock: %s %s: %w (%w)", op, quote(name), err, errors.Join(errs...))
}
