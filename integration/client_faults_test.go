package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Close while many Lock calls wait: every one returns ErrClosed at once, and
// nothing is left running (goleak in TestMain).
func TestCloseDuringWaits(t *testing.T) {
	srv := testserver.StartRedis(t)
	holder := newClient(t, srv.Client())
	waiters := newClient(t, srv.Client())
	ctx := ctxT(t)
	for _, name := range []string{"cf:wait", "cf:wait:b"} {
		if err := holder.NewMutex(name).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 50)
	for i := range 50 {
		go func() {
			errs <- waiters.NewMutex([]string{"cf:wait", "cf:wait:b"}[i%2]).Lock(ctx)
		}()
	}
	testserver.WaitFor(t, 5*time.Second, "the waiters to subscribe", func() bool {
		return len(adminClient(t, srv).PubSubChannels(ctx, "dlock:notice:*").Val()) > 0
	})
	closed := time.Now()
	if err := waiters.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range 50 {
		select {
		case err := <-errs:
			if !errors.Is(err, dlock.ErrClosed) {
				t.Fatalf("waiter after Close = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter did not return after Close")
		}
	}
	if d := time.Since(closed); d > 2*time.Second {
		t.Fatalf("waiters returned %v after Close", d)
	}
}

// Close while renewal passes are in flight on a slow network: Close returns,
// releases what it can, and every key is gone within a lease.
func TestCloseDuringRenewals(t *testing.T) {
	srv := testserver.StartRedis(t)
	fp := newFaultProxy(t, srv.Addr)
	c, err := dlock.New(fp.client(srv), dlock.WithWatchdogTimeout(faultLease), dlock.WithRenewInterval(50*time.Millisecond),
		dlock.WithCloseTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for i := range 200 {
		if err := c.NewMutex(fmt.Sprintf("cf:renew:%d", i)).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	faults[0].inject(fp) // latency: passes take a while, so one is in flight
	testserver.WaitFor(t, 5*time.Second, "renewal passes", func() bool { return c.Stats().Passes >= 2 })
	start := time.Now()
	_ = c.Close() // errors are allowed (the network is slow); it must return
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v", d)
	}
	fp.heal()
	admin := adminClient(t, srv)
	testserver.WaitFor(t, faultLease+time.Second, "every key gone within a lease", func() bool {
		return len(admin.Keys(ctx, "cf:renew:*").Val()) == 0
	})
}

// Thousands of handles created and dropped: no goroutine per handle, nothing
// held afterwards, nothing left in Redis.
func TestThousandsOfHandles(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := newClient(t, srv.Client())
	ctx := ctxT(t)
	runtime.GC()
	before := runtime.NumGoroutine()
	for i := range 5000 {
		m := c.NewMutex(fmt.Sprintf("cf:handle:%d", i%500))
		if i%5 == 0 {
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Fatalf("%d goroutines after 5,000 handles, %d before", after, before)
	}
	if s := c.Stats(); s.Held != 0 {
		t.Fatalf("Stats().Held = %d after every handle unlocked", s.Held)
	}
	if keys := adminClient(t, srv).Keys(ctx, "cf:handle:*").Val(); len(keys) != 0 {
		t.Fatalf("%d lock keys left", len(keys))
	}
}

// Contexts cancelled at random points of Lock, of the hold, and of Unlock:
// no panic, every call returns, and within a lease nothing is held or left.
func TestRandomCancellations(t *testing.T) {
	srv := testserver.StartRedis(t)
	clients := []*dlock.Client{newClient(t, srv.Client()), newClient(t, srv.Client())}
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			c := clients[g%2]
			for range 20 {
				m := c.NewMutex(fmt.Sprintf("cf:cancel:%d", rand.IntN(4)))
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(20))*time.Millisecond)
				if err := m.Lock(ctx); err == nil {
					time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond) // the hold; ctx may end in it
					uctx, ucancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(3))*time.Millisecond)
					_ = m.Unlock(uctx) // may fail: its context may end first
					ucancel()
				} else if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Lock: %v", err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	admin := adminClient(t, srv)
	testserver.WaitFor(t, lease+time.Second, "nothing held or left within a lease", func() bool {
		return len(admin.Keys(context.Background(), "cf:cancel:*").Val()) == 0 &&
			clients[0].Stats().Held == 0 && clients[1].Stats().Held == 0
	})
}
