package dlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedissonName(t *testing.T) {
	assert.Equal(t, "redisson_lock__channel:{a}", redissonName("redisson_lock__channel", "a"))
	assert.Equal(t, "redisson_lock__channel:{a}b", redissonName("redisson_lock__channel", "{a}b"))
	assert.Equal(t, slotOf("x:y"), slotOf(redissonName("redisson_lock_token", "x:y")))
	assert.Equal(t, slotOf("p{t}q"), slotOf(redissonName("redisson_lock_token", "p{t}q")))
}

// A handle's owner field is the same for all its holds, so a background
// release of its previous hold (its Lock context ended) must land before its
// next acquire: Lock waits for the release in flight, and the new hold is
// not deleted by it.
func TestRedissonNextHoldWaitsForPendingRelease(t *testing.T) {
	clk := newFakeClock()
	c, mr, _ := newMini(t, WithWatchdogTimeout(wdTimeout), WithRenewInterval(wdInterval), withClock(clk),
		WithRedissonCompat("9b2f4d1e-8c3a-4e5f-a6b7-c8d9e0f1a2b3"))
	fx := &fakeExec{passes: make(chan *fakePass, 16)}
	c.w.mu.Lock()
	c.w.exec = fx.exec
	c.w.mu.Unlock()
	f := &watchdogFixture{t: t, c: c, clk: clk, fx: fx}

	m := c.NewMutex("x")
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, m.Lock(ctx))
	cancel() // the hold ends; its field is released in the background
	p := f.nextPass()
	require.Len(t, p.batch, 1)
	require.Equal(t, kindOrphan, p.batch[0].kind)
	require.NoError(t, m.Unlock(context.Background()))

	done := make(chan error, 1)
	go func() { done <- m.Lock(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Lock returned (%v) while the release of the previous hold was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	mr.Del("x") // what the release in flight does
	p.answer(1, nil)
	require.NoError(t, <-done)
	v := mr.HGet("x", m.field)
	assert.Equal(t, "1", v, "the new hold's count")
	assert.True(t, m.IsHeld())
	require.NoError(t, m.Unlock(context.Background()))
}

// Two open Clients of one process with one client id would hand out the same
// owner fields: the second New is refused until the first is closed.
func TestRedissonCompatIDOncePerProcess(t *testing.T) {
	const id = "0c9d8e7f-6a5b-4c3d-9e2f-1a0b9c8d7e6f"
	c1, _, rdb := newMini(t, WithRedissonCompat(id))
	_, err := New(rdb, WithRedissonCompat(id))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, c1.Close())
	c2, err := New(rdb, WithRedissonCompat(id))
	require.NoError(t, err)
	require.NoError(t, c2.Close())
}
