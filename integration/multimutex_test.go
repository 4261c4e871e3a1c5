package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/slot"
	"github.com/dlock-go/dlock/internal/testserver"
)

// multiNames returns n lock names with prefix, each in its own hash slot.
func multiNames(prefix string, n int) []string {
	var out []string
	seen := map[uint16]bool{}
	for i := 0; len(out) < n; i++ {
		name := fmt.Sprintf("%s:%d", prefix, i)
		if s := slot.Of(name); !seen[s] {
			seen[s] = true
			out = append(out, name)
		}
	}
	return out
}

// All or nothing: with one name held elsewhere, TryLock gives up and leaves
// none of the others taken; once it is free, Lock takes all three, each with
// its own fencing token, and a Mutex on any of the names is excluded.
func TestMultiMutexAllOrNothing(t *testing.T) {
	srv, admin, c := setup(t)
	other := newClient(t, srv.Client())
	ctx := ctxT(t)
	names := multiNames("multi:all", 3)
	blocker := other.NewMutex(names[1])
	if err := blocker.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	mm := c.NewMultiMutex(names)
	ok, err := mm.TryLock(ctx, 200*time.Millisecond)
	if ok || err != nil {
		t.Fatalf("TryLock with %s held elsewhere = %v, %v", names[1], ok, err)
	}
	for _, n := range names {
		if n != names[1] && admin.Exists(ctx, n).Val() != 0 {
			t.Fatalf("%s left taken by a TryLock that gave up", n)
		}
	}
	if mm.IsHeld() || mm.FencingTokens() != nil {
		t.Fatal("handle reports a hold after a failed TryLock")
	}
	if err := blocker.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	toks := mm.FencingTokens()
	if len(toks) != 3 || !mm.IsHeld() {
		t.Fatalf("tokens %v, IsHeld %v", toks, mm.IsHeld())
	}
	for _, n := range names {
		if toks[n] <= 0 || mm.FencingToken(n) != toks[n] {
			t.Fatalf("token of %s = %d", n, toks[n])
		}
		if ok, err := other.NewMutex(n).TryLock(ctx, 0); ok || err != nil {
			t.Fatalf("a Mutex on %s got through the MultiMutex: %v, %v", n, ok, err)
		}
	}
	if err := mm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if admin.Exists(ctx, n).Val() != 0 {
			t.Fatalf("%s still set after Unlock", n)
		}
	}
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v", err)
	}
}

// MultiMutexes over the same names given in opposite orders, on three
// Clients, eight goroutines each, all finish (a fixed lock order means no
// deadlock) and never hold the shared names at the same time.
func TestMultiMutexContendersNeverDeadlock(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := multiNames("multi:dead", 4)
	reversed := []string{names[3], names[2], names[1], names[0]}
	var inside, maxInside, rounds atomic.Int32
	var wg sync.WaitGroup
	for ci := range 3 {
		c := newClient(t, srv.Client())
		for g := range 8 {
			set := names
			if (ci+g)%2 == 1 {
				set = reversed
			}
			if g%3 == 2 {
				set = set[1:] // overlapping, not equal, sets too
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				mm := c.NewMultiMutex(set)
				for range 5 {
					if err := mm.Lock(ctx); err != nil {
						t.Errorf("Lock %v: %v", set, err)
						return
					}
					n := inside.Add(1)
					for {
						m := maxInside.Load()
						if n <= m || maxInside.CompareAndSwap(m, n) {
							break
						}
					}
					inside.Add(-1)
					rounds.Add(1)
					if err := mm.Unlock(ctx); err != nil {
						t.Errorf("Unlock %v: %v", set, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("contenders did not finish within 60s: deadlock?")
	}
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders of overlapping sets at once", maxInside.Load())
	}
	if rounds.Load() != 3*8*5 {
		t.Fatalf("%d rounds, want %d", rounds.Load(), 3*8*5)
	}
}

// The loss of one name ends the whole hold: Done closes, Err names the lost
// lock, the other names are released in the background, and Unlock reports
// the loss.
func TestMultiMutexLossEndsWholeHold(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	names := multiNames("multi:loss", 3)
	mm := c.NewMultiMutex(names)
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	admin.Set(ctx, names[1], "00000000-0000-4000-8000-000000000000", time.Minute)
	if !closedWithin(mm.Done(), 2*lease) {
		t.Fatal("loss of one name did not end the hold")
	}
	if err := mm.Err(); !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), names[1]) {
		t.Fatalf("Err = %v, want ErrLockLost naming %s", err, names[1])
	}
	if mm.IsHeld() {
		t.Fatal("IsHeld after the loss")
	}
	testserver.WaitFor(t, 2*lease, "the other names released", func() bool {
		return admin.Exists(ctx, names[0]).Val() == 0 && admin.Exists(ctx, names[2]).Val() == 0
	})
	if v := admin.Get(ctx, names[1]).Val(); v != "00000000-0000-4000-8000-000000000000" {
		t.Fatalf("the thief's key was touched: %q", v)
	}
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the loss = %v", err)
	}
	// The handle is free again.
	admin.Del(ctx, names[1])
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Every name is renewed: held across several leases, all keys stay fresh.
func TestMultiMutexRenewsEveryName(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	names := multiNames("multi:renew", 3)
	mm := c.NewMultiMutex(names)
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s0 := c.Stats()
	testserver.WaitFor(t, 10*lease, "every name renewed 4 times", func() bool {
		return c.Stats().Renewals >= s0.Renewals+12
	})
	if !mm.IsHeld() {
		t.Fatalf("hold lost: %v", mm.Err())
	}
	for _, n := range names {
		if d := admin.PTTL(ctx, n).Val(); d < lease-2*renew {
			t.Fatalf("%s PTTL %v: not renewed", n, d)
		}
	}
	if err := mm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Lock waiting for a busy name returns when its context ends, keeping
// nothing; a hold whose Lock context ends releases every name.
func TestMultiMutexContext(t *testing.T) {
	srv, admin, c := setup(t)
	other := newClient(t, srv.Client())
	ctx := ctxT(t)
	names := multiNames("multi:ctx", 3)
	blocker := other.NewMutex(names[2])
	if err := blocker.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	mm := c.NewMultiMutex(names)
	if err := mm.Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an ending context = %v", err)
	}
	for _, n := range names[:2] {
		if admin.Exists(ctx, n).Val() != 0 {
			t.Fatalf("%s kept after the Lock gave up", n)
		}
	}
	if err := blocker.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	if err := mm.Lock(hctx); err != nil {
		t.Fatal(err)
	}
	hcancel()
	if !closedWithin(mm.Done(), time.Second) {
		t.Fatal("Done not closed when the Lock context ended")
	}
	testserver.WaitFor(t, 2*time.Second, "every name released", func() bool {
		for _, n := range names {
			if admin.Exists(ctx, n).Val() != 0 {
				return false
			}
		}
		return true
	})
	if err := mm.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the context ended = %v", err)
	}
}
