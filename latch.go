package dlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of CountDownLatch (latch_*.lua).
var (
	latchSetScript       = loadScript("latch_set")
	latchSetSource       = scriptSource("latch_set")
	latchCountDownScript = loadScript("latch_count_down")
	latchCountDownSource = scriptSource("latch_count_down")

	// WithRedissonCompat: Redisson's channel and messages (redisson_latch_*.lua).
	redissonLatchSetScript       = loadScript("redisson_latch_set")
	redissonLatchSetSource       = scriptSource("redisson_latch_set")
	redissonLatchCountDownScript = loadScript("redisson_latch_count_down")
	redissonLatchCountDownSource = scriptSource("redisson_latch_count_down")
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
// On a Client WithRedissonCompat the key is the same (Redisson's
// RCountDownLatch keeps the same string at the name and deletes it at zero),
// but the messages are Redisson's, on its channel
// "redisson_countdownlatch__channel__{<name>}" (with the braces even when the
// name has some, as RedissonCountDownLatch.getChannelName writes it): the
// count-down to zero publishes 0 (CountDownLatchPubSub.ZERO_COUNT_MESSAGE),
// TrySetCount publishes 1 (NEW_COUNT_MESSAGE), and waiters wait on that
// channel, so that Java and Go services share one latch and wake each other.
// TrySetCount then sets the count only when the key is absent, as Redisson's
// does (without the option, a key holding 0 or less counts as not set).
//
// A CountDownLatch is not supported on a Redlock Client (every call returns
// an error matching ErrInvalidArgument). All methods are safe for concurrent
// use.
type CountDownLatch struct {
	c       *Client
	n       *node
	name    string
	keys    []string // {name}
	channel string   // the notice channel of the name's hash slot, or Redisson's
	err     error

	// latch_set and latch_count_down, or Redisson's (redisson_latch_*) on a
	// Client WithRedissonCompat.
	setScript, countDownScript *redis.Script
	setSource, countDownSource string
	compat                     bool
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
		l.setScript, l.setSource = latchSetScript, latchSetSource
		l.countDownScript, l.countDownSource = latchCountDownScript, latchCountDownSource
		if c.redisson() {
			l.compat = true
			l.channel = redissonLatchChannel(name)
			l.setScript, l.setSource = redissonLatchSetScript, redissonLatchSetSource
			l.countDownScript, l.countDownSource = redissonLatchCountDownScript, redissonLatchCountDownSource
		}
	}
	return l
}

// redissonLatchChannel is RedissonCountDownLatch.getChannelName():
// "redisson_countdownlatch__channel__{" + name + "}", braces always (it does
// not use prefixName).
func redissonLatchChannel(name string) string {
	return "redisson_countdownlatch__channel__{" + name + "}"
}

// Name returns the latch's name, which is also its Redis key.
func (l *CountDownLatch) Name() string { return l.name }

// TrySetCount sets the count to n only if the latch is not set (its key is
// absent, or holds 0 or less), and reports whether it did: Redisson's
// trySetCount. n must be positive, else the error matches
// ErrInvalidArgument. On a Client WithRedissonCompat it sets the count only
// when the key is absent (Redisson checks EXISTS) and publishes 1 on
// Redisson's channel.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if err := familyCheck(ctx, l.c, l.err, "set count of", l.name); err != nil {
		return false, err
	}
	if n <= 0 {
		return false, invalid("count of latch %s must be positive, got %d", quote(l.name), n)
	}
	args := []any{n}
	if l.compat {
		args = append(args, l.c.pubArg, l.channel)
	}
	v, err := l.n.run(ctx, l.setScript, l.setSource, l.keys, args...)
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
// a latch that is not set changes nothing, as in Redisson. On a Client
// WithRedissonCompat the count-down to exactly zero publishes "0" on
// Redisson's channel; one from 0 or less deletes the key without a message,
// as Redisson's countDown does.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := familyCheck(ctx, l.c, l.err, "count down", l.name); err != nil {
		return err
	}
	_, err := l.n.run(ctx, l.countDownScript, l.countDownSource, l.keys, l.c.pubArg, l.channel)
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
	w := wait{op: "wait for", name: l.name, channel: l.channel, bounded: bounded}
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
		l.c.n.pokeOn(l.channel, l.name)
	}
	return ok, err
}
