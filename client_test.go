package dlock

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newMini returns a Client on a fresh miniredis, for quick tests that need no
// real server; behaviour is proven against redis-server in ./integration.
func newMini(t *testing.T, opts ...Option) (*Client, *miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, mr, rdb
}

func TestNewRejectsBadInput(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	var typedNil *redis.Client
	cases := []struct {
		name string
		rdb  redis.UniversalClient
		opts []Option
		want string
	}{
		{"nil client", nil, nil, "nil"},
		{"typed nil client", typedNil, nil, "nil"},
		{"zero watchdog timeout", rdb, []Option{WithWatchdogTimeout(0)}, "watchdog timeout"},
		{"negative watchdog timeout", rdb, []Option{WithWatchdogTimeout(-time.Second)}, "watchdog timeout"},
		{"zero renew interval", rdb, []Option{WithRenewInterval(0)}, "renew interval"},
		{"negative renew interval", rdb, []Option{WithRenewInterval(-1)}, "renew interval"},
		{"renew interval equal to timeout", rdb, []Option{WithWatchdogTimeout(time.Second), WithRenewInterval(time.Second)}, "below the watchdog timeout"},
		{"renew interval above timeout", rdb, []Option{WithWatchdogTimeout(time.Second), WithRenewInterval(2 * time.Second)}, "below the watchdog timeout"},
		{"renew interval above default timeout", rdb, []Option{WithRenewInterval(time.Minute)}, "below the watchdog timeout"},
		{"renew interval leaving no time to renew", rdb, []Option{WithWatchdogTimeout(100 * time.Millisecond), WithRenewInterval(99 * time.Millisecond)}, "no time to renew"},
		{"ring", ring, nil, "Ring"},
		{"nil backoff", rdb, []Option{WithBackOff(nil)}, "WithBackOff"},
		{"zero batch size", rdb, []Option{WithRenewBatchSize(0)}, "batch size"},
		{"zero close timeout", rdb, []Option{WithCloseTimeout(0)}, "close timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.rdb, tc.opts...)
			require.Nil(t, c)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNewDefaults(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c, err := New(rdb, nil) // a nil option is ignored
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	assert.Equal(t, 30*time.Second, c.cfg.watchdogTimeout, "default watchdog timeout")
	assert.Equal(t, 10*time.Second, c.cfg.renewInterval, "default renew interval")
	c2, err := New(rdb, WithWatchdogTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.cfg.renewInterval != time.Second {
		t.Fatalf("renew interval = %v, want timeout/3 = 1s", c2.cfg.renewInterval)
	}
}

func TestDefaultBackOffSteps(t *testing.T) {
	b := DefaultBackOff()
	var prev time.Duration
	for i := range 20 {
		d := b.NextBackOff()
		if d == backoff.Stop || d <= 0 || d > DefaultBackOffMax {
			t.Fatalf("step %d = %v", i, d)
		}
		if i == 0 && (d < DefaultBackOffInitial/2 || d > DefaultBackOffInitial*3/2) {
			t.Fatalf("first step %v, want about %v", d, DefaultBackOffInitial)
		}
		prev = d
	}
	if prev < DefaultBackOffMax/2 {
		t.Fatalf("step 20 = %v, want near the cap %v", prev, DefaultBackOffMax)
	}
}

// A custom backoff is used between attempts.
func TestWithBackOffIsUsed(t *testing.T) {
	calls := 0
	c, _, rdb := newMini(t, WithoutPubSub(), WithBackOff(func() backoff.BackOff {
		calls++
		return backoff.NewConstantBackOff(5 * time.Millisecond)
	}))
	ctx := context.Background()
	rdb.Set(ctx, "lock:bo", "00000000-0000-4000-8000-000000000000", 0) // held forever by someone
	// Long enough for several sleeps even on a loaded machine; the factory is
	// called once per call that has to wait.
	ok, err := c.NewMutex("lock:bo").TryLock(ctx, 300*time.Millisecond)
	if ok || err != nil || calls != 1 {
		t.Fatalf("TryLock = %v, %v with %d backoff factories; want false, nil, 1", ok, err, calls)
	}
}

func TestMiniredisLockUnlock(t *testing.T) {
	c, mr, _ := newMini(t)
	ctx := context.Background()
	m := c.NewMutex("lock:mini")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if !mr.Exists("lock:mini") || m.FencingToken() <= 0 {
		t.Fatalf("key exists %v, token %d", mr.Exists("lock:mini"), m.FencingToken())
	}
	if ok, err := c.NewMutex("lock:mini").TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("second TryLock = %v, %v", ok, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if mr.Exists("lock:mini") {
		t.Fatal("key left after Unlock")
	}
}

// A BackOff factory that returns nil, or a BackOff with negative steps, does
// not panic or spin: the default applies.
func TestBrokenBackOffFallsBack(t *testing.T) {
	ctx := context.Background()
	for name, f := range map[string]func() backoff.BackOff{
		"nil":      func() backoff.BackOff { return nil },
		"negative": func() backoff.BackOff { return backoff.NewConstantBackOff(-time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			c, _, rdb := newMini(t, WithBackOff(f))
			rdb.Set(ctx, "lock:bo", "00000000-0000-4000-8000-000000000000", 0)
			start := time.Now()
			ok, err := c.NewMutex("lock:bo").TryLock(ctx, 50*time.Millisecond)
			require.NoError(t, err)
			require.False(t, ok)
			require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
		})
	}
}

// A client dlock does not know (here a wrapper around a single-node client)
// gets renewal batches of one hash slot each, which a cluster needs.
func TestPlanGroupsBySlotForUnknownClients(t *testing.T) {
	inner := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer inner.Close()
	c, err := New(wrapped{inner}, WithRenewBatchSize(100))
	require.NoError(t, err)
	defer c.Close()
	require.False(t, c.st.(*node).sameNode)
	batch := []*entry{{kind: kindRenew, key: "a", slot: slotOf("a")}, {kind: kindRenew, key: "b", slot: slotOf("b")},
		{kind: kindRenew, key: "{a}x", slot: slotOf("{a}x")}}
	calls := c.st.(*node).plan(batch)
	require.Len(t, calls, 2, "keys of two slots make two calls")
	require.Equal(t, []int{0, 2}, calls[0].idx)

	single, err := New(inner, WithRenewBatchSize(100))
	require.NoError(t, err)
	defer single.Close()
	require.Len(t, single.st.(*node).plan(batch), 1, "one server: one call for every slot")
}

type wrapped struct{ *redis.Client }
