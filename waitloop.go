package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// A try is one attempt of a wait (take a read lock, some permits, ...). It
// reports whether it succeeded; when not, hint bounds how long the thing it
// waits for stays busy at most (the holder's remaining lease, say), or is
// negative when unknown. An error that is transient is retried; any other
// ends the wait.
type try func(ctx context.Context) (ok bool, hint time.Duration, err error)

// A wait describes one waiting call of the synchronizers built on waitFor.
type wait struct {
	op      string    // what is being done, for errors: "lock", "acquire", ...
	name    string    // the object's name: its notices wake the wait
	channel string    // where its notices come: "" is the name's slot channel
	id      string    // if set, notices addressed to this id wake this wait alone
	bounded bool      // the wait ends at until
	until   time.Time // when a bounded wait gives up
}

// waitFor runs t until it succeeds, sleeping between attempts for the next
// backoff step, capped by the attempt's hint and by the time left, and waking
// early on a notice for w.name. It returns true when t succeeded; false and
// nil when a bounded wait ran out; an error when ctx ended (matching ctx.Err),
// the Client closed (ErrClosed), or t failed for good. Transient errors are
// retried; when a bounded wait runs out after one, that error is returned.
// It is the Mutex's waiting (lock.go), for the other synchronizers.
func (c *Client) waitFor(ctx context.Context, w wait, t try) (bool, error) {
	var (
		bo      backoff.BackOff
		timer   *time.Timer
		lastErr error
		sub     *waiter
		joined  bool
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if sub != nil {
			c.n.leave(sub)
		}
	}()
	channel := w.channel
	if channel == "" {
		channel = noticeChannel(w.name)
	}
	if c.n != nil && w.id == "" {
		if sub = c.n.joinIfReadyOn(channel, w.name); sub != nil {
			joined = true
		}
	}
	for attempt := 0; ; attempt++ {
		if c.closed() {
			return false, fmt.Errorf("dlock: %s %s: %w", w.op, quote(w.name), ErrClosed)
		}
		actx, cancel := ctx, context.CancelFunc(nil)
		if w.bounded && attempt > 0 {
			actx, cancel = context.WithDeadline(ctx, w.until)
		}
		ok, hint, err := t(actx)
		if cancel != nil {
			cancel()
		}
		switch {
		case err == nil && ok:
			return true, nil
		case err == nil:
			lastErr = nil
		case errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrWrongType) || errors.Is(err, ErrClosed):
			return false, err
		default:
			if kind, isForeign := foreignKind(err); isForeign {
				return false, wrongType(w.name, kind)
			}
			if ctx.Err() != nil {
				if lastErr != nil && errors.Is(err, ctx.Err()) {
					err = lastErr
				}
				return false, ctxErr(ctx, w.op, w.name, err)
			}
			if w.bounded && !time.Now().Before(w.until) {
				return false, timeUp(w.name, lastErr)
			}
			if !isTransient(err) {
				return false, redisErr(w.op, w.name, err)
			}
			lastErr = err
			hint = -1
		}
		left := time.Duration(1<<63 - 1)
		if w.bounded {
			if left = time.Until(w.until); left <= 0 {
				if lastErr != nil {
					return false, redisErr(w.op, w.name, lastErr)
				}
				return false, nil
			}
		}
		if !joined && lastErr == nil && c.n != nil {
			joined = true
			sub = c.n.joinOn(ctx, channel, w.name, w.id, left)
			if sub != nil {
				continue // a notice sent before the subscription may be lost: look again
			}
		}
		if bo == nil {
			if bo = c.cfg.backOff(); bo == nil {
				bo = DefaultBackOff()
			}
		}
		d := bo.NextBackOff()
		if d < 0 {
			d = DefaultBackOffMax
		}
		if hint >= 0 && hint < d {
			d = hint
		}
		d = min(d, left)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		var woken <-chan struct{}
		if sub != nil {
			woken = sub.ch
		}
		select {
		case <-timer.C:
		case <-woken:
			if c.n.dropped(sub) {
				c.n.leave(sub)
				sub, joined = nil, false
			}
		case <-ctx.Done():
			return false, ctxErr(ctx, w.op, w.name, lastErr)
		case <-c.closing:
			return false, fmt.Errorf("dlock: %s %s: %w", w.op, quote(w.name), ErrClosed)
		}
	}
}
