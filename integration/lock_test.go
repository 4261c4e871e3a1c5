package integration

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestLockUnlockWritesTokenWithLease(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:basic")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	val, err := rdb.Get(ctx, "lock:basic").Result()
	if err != nil || len(val) != 36 {
		t.Fatalf("key holds %q (%v), want a 36-character UUID token", val, err)
	}
	pttl := rdb.PTTL(ctx, "lock:basic").Val()
	if pttl <= 0 || pttl > lease {
		t.Fatalf("PTTL = %v, want in (0, %v]", pttl, lease)
	}
	if !m.IsHeld() || m.HoldCount() != 1 || m.FencingToken() <= 0 || isClosed(m.Done()) || m.Err() != nil {
		t.Fatalf("held: IsHeld=%v HoldCount=%d FencingToken=%d Done closed=%v Err=%v",
			m.IsHeld(), m.HoldCount(), m.FencingToken(), isClosed(m.Done()), m.Err())
	}
	if locked, err := m.IsLocked(ctx); !locked || err != nil {
		t.Fatalf("IsLocked = %v, %v", locked, err)
	}
	done := m.Done()
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if n := rdb.Exists(ctx, "lock:basic").Val(); n != 0 {
		t.Fatal("key still exists after Unlock")
	}
	if !isClosed(done) || !isClosed(m.Done()) || m.IsHeld() || m.FencingToken() != 0 || m.HoldCount() != 0 || m.Err() != nil {
		t.Fatalf("after Unlock: done closed=%v IsHeld=%v FencingToken=%d HoldCount=%d Err=%v",
			isClosed(done), m.IsHeld(), m.FencingToken(), m.HoldCount(), m.Err())
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
}

func TestFreshTokenPerAcquisition(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:tokens")
	seen := map[string]bool{}
	for range 5 {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		v := rdb.Get(ctx, "lock:tokens").Val()
		if seen[v] {
			t.Fatalf("token %q used twice", v)
		}
		seen[v] = true
		if v[14] != '4' {
			t.Fatalf("token %q is not a UUID v4", v)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSecondTryLockTimesOut(t *testing.T) {
	srv, _, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	if err := a.NewMutex("lock:busy").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	mb := b.NewMutex("lock:busy")
	ok, err := mb.TryLock(ctx, 0)
	if ok || err != nil {
		t.Fatalf("TryLock(0) = %v, %v; want false, nil", ok, err)
	}
	start := time.Now()
	ok, err = mb.TryLock(ctx, 250*time.Millisecond)
	if ok || err != nil {
		t.Fatalf("TryLock(250ms) = %v, %v; want false, nil", ok, err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("TryLock gave up after %v, before its wait of 250ms", el)
	}
	if mb.IsHeld() || !isClosed(mb.Done()) {
		t.Fatal("a failed TryLock left the handle holding")
	}
}

func TestWaiterGetsLockAfterRelease(t *testing.T) {
	srv, _, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	ma := a.NewMutex("lock:handoff")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tokenA := ma.FencingToken()
	mb := b.NewMutex("lock:handoff")
	got := make(chan error, 1)
	go func() { got <- mb.Lock(ctx) }()
	// The waiter must not get the lock while A holds it.
	select {
	case err := <-got:
		t.Fatalf("waiter returned %v while the lock was held", err)
	case <-time.After(3 * renew):
	}
	if err := ma.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not get the lock within 5s of the release")
	}
	if mb.FencingToken() <= tokenA {
		t.Fatalf("waiter's token %d not above the first holder's %d", mb.FencingToken(), tokenA)
	}
	_ = mb.Unlock(ctx)
}

func TestLockWaitsUntilContextEnds(t *testing.T) {
	srv, _, a := setup(t)
	b := newClient(t, srv.Client())
	if err := a.NewMutex("lock:ctx").Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := b.NewMutex("lock:ctx").Lock(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want an error matching context.DeadlineExceeded", err)
	}
	cctx, ccancel := context.WithCancelCause(context.Background())
	why := errors.New("shutting down")
	time.AfterFunc(50*time.Millisecond, func() { ccancel(why) })
	err = b.NewMutex("lock:ctx").Lock(cctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, why) {
		t.Fatalf("Lock = %v, want an error matching context.Canceled and its cause", err)
	}
}

func TestHolderContextCancelFreesLockAtOnce(t *testing.T) {
	_, rdb, c := setup(t, dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	m := c.NewMutex("lock:bound")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if !closedWithin(m.Done(), time.Second) {
		t.Fatal("Done did not close when the Lock context was cancelled")
	}
	// The key is released long before its 30s lease.
	testserver.WaitFor(t, 2*time.Second, "the key to be deleted", func() bool {
		return rdb.Exists(context.Background(), "lock:bound").Val() == 0
	})
	if !errors.Is(m.Err(), context.Canceled) || m.IsHeld() {
		t.Fatalf("Err = %v, IsHeld = %v; want context.Canceled, false", m.Err(), m.IsHeld())
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock after the Lock context ended = %v, want nil", err)
	}
	if err := m.Lock(context.Background()); err != nil {
		t.Fatalf("relock: %v", err)
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Goroutines sharing one non-reentrant handle exclude each other, as with sync.Mutex.
func TestSharedHandleExcludesLocally(t *testing.T) {
	_, _, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:shared")
	var cs criticalSection
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if err := m.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				cs.enter()
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cs.check(t, 40)
}

// Many clients hammer one name: the critical section never runs twice at once.
func TestMutualExclusionAcrossClients(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxT(t)
	var cs criticalSection
	var wg sync.WaitGroup
	for range 4 {
		c := newClient(t, srv.Client())
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					err := c.WithLock(ctx, "lock:hammer", func(context.Context, int64) error {
						cs.enter()
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	cs.check(t, 160)
}

// criticalSection counts entries into a critical section and the most
// goroutines ever inside it at once.
type criticalSection struct{ inside, most, total atomic.Int32 }

func (c *criticalSection) enter() {
	n := c.inside.Add(1)
	for old := c.most.Load(); n > old && !c.most.CompareAndSwap(old, n); old = c.most.Load() {
	}
	c.total.Add(1)
	c.inside.Add(-1)
}

// check fails the test unless the section ran total times, one at a time.
func (c *criticalSection) check(t *testing.T, total int32) {
	t.Helper()
	if c.most.Load() != 1 || c.total.Load() != total {
		t.Fatalf("most inside at once = %d, entries = %d; want 1, %d", c.most.Load(), c.total.Load(), total)
	}
}
