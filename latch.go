package dlock

import (
	"context"
	"time"
)

// The scripts of CountDownLatch (latch_*.lua).
var (
	latchSetScript       = loadScript("latch_set")
	latchSetSource       = scriptSource("latch_set")
	latchCountDownScript = loadScript("latch_count_down")
	latchCountDownSource = scriptSource("latch_count_down")
)

// A CountDownLatch lets any number of waiters, in any process, wait until a
// count set by TrySetCount has been counted down to zero: Redisson's
// RCountDownLatch. Its Redis key is the name itself, a string holding the
// count (Redisson's layout), with no expiry; the key is deleted when the
// count reaches zero, so the latch can then be set again. Get one from
// Client.NewCountDownLatch.
//
// A latch that is not set (never set, or counted down to zero) is open: Wait
// returns at once, as Redisson's await does for a count of 0.
//
// The count-down that opens the latch announces it on the Client's notifier:
// every waiting Client wakes one waiter, which wakes the next local one, so
// all waiters go at once, not after their backoff step.
//
// A CountDownLatch is not supported on a Redlock Client (every call returns
// an error matching ErrInvalidArgument). All methods are safe for concurrent
// use.
type CountDownLatch struct {
	c       *Client
	n       *node
	name    string
	keys    []string // {name}
	channel string
	err     error
}

// NewCountDownLatch returns a handle on the latch called name. It does not
// talk to Redis. An empty name, a name in dlock's reserved "dlock:fence:"
// prefix, a nil Client or a Redlock Client does not panic: every call on the
// handle then returns an error matching ErrInvalidArgument.
func (c *Client) NewCountDownLatch(name string) *CountDownLatch {
	l := &CountDownLatch{c: c, name: name}
	l.n, l.err = c.familyStore("NewCountDownLatch", "latch", name)
	if l.err == nil {
		l.keys = []string{name}
		l.channel = noticeChannel(name)
	}
	return l
}

// Name returns the latch's name, which is also its Redis key.
func (l *CountDownLatch) Name() string { return l.name }

// TrySetCount sets the count to n only if the latch is not set (its key is
// absent, or holds 0 or less), and reports whether it did: Redisson's
// trySetCount. n must be positive, else the error matches
// ErrInvalidArgument.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if err := familyCheck(ctx, l.c, l.err, "set count of", l.name); err != nil {
		return false, err
	}
	if n <= 0 {
		return false, invalid("count of latch %s must be positive, got %d", quote(l.name), n)
	}
	v, err := l.n.run(ctx, latchSetScript, latchSetSource, l.keys, n)
	if err != nil {
		return false, countErr("set count of", l.name, "latch count", err)
	}
	st, ok := v.(int64)
	if !ok {
		return false, unexpected("latch_set", v)
	}
	return st == 1, nil
}

// CountDown decrements the count by one; at zero the latch's key is deleted
// and its waiters, here and in every other process, are woken. Counting down
// a latch that is not set changes nothing, as in Redisson.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := familyCheck(ctx, l.c, l.err, "count down", l.name); err != nil {
		return err
	}
	_, err := l.n.run(ctx, latchCountDownScript, latchCountDownSource, l.keys, l.c.pubArg, l.channel)
	if err != nil {
		return countErr("count down", l.name, "latch count", err)
	}
	return nil
}

// Count returns the current count: 0 when the latch is not set.
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if err := familyCheck(ctx, l.c, l.err, "read count of", l.name); err != nil {
		return 0, err
	}
	v, err := readCount(ctx, l.n, l.name, "latch count")
	if err != nil {
		return 0, countErr("read count of", l.name, "latch count", err)
	}
	return max(v, 0), nil
}

// Wait waits until the count is zero, as long as it takes, until ctx ends
// (the error then matches ctx.Err()) or the Client closes (ErrClosed).
// Transient Redis errors are retried while it waits.
func (l *CountDownLatch) Wait(ctx context.Context) error {
	_, err := l.wait(ctx, 0, false)
	return err
}

// TryWait waits up to wait until the count is zero: it returns (true, nil)
// when it is, and (false, nil) when wait ran out first. TryWait(ctx, 0) looks
// once. A negative wait returns an error matching ErrInvalidArgument.
func (l *CountDownLatch) TryWait(ctx context.Context, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryWait wait must not be negative, got %v", wait)
	}
	return l.wait(ctx, wait, true)
}

func (l *CountDownLatch) wait(ctx context.Context, d time.Duration, bounded bool) (bool, error) {
	if err := familyCheck(ctx, l.c, l.err, "wait for", l.name); err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		return false, ctxErr(ctx, "wait for", l.name, nil)
	}
	w := wait{op: "wait for", name: l.name, bounded: bounded}
	if bounded {
		w.until = time.Now().Add(d)
	}
	ok, err := l.c.waitFor(ctx, w, func(actx context.Context) (bool, time.Duration, error) {
		v, err := readCount(actx, l.n, l.name, "latch count")
		if err != nil {
			return false, -1, err
		}
		return v <= 0, -1, nil
	})
	if ok {
		// A notice wakes one waiter per Client: pass it on, so that every
		// local waiter goes.
		l.c.n.poke(l.name)
	}
	return ok, err
}
