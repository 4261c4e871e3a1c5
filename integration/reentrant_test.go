package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestReentrantHoldCount(t *testing.T) {
	srv, rdb, c := setup(t)
	other := newClient(t, srv.Client())
	ctx := ctxT(t)
	m := c.NewMutex("lock:re", dlock.WithReentrant())
	for i := 1; i <= 3; i++ {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if m.HoldCount() != i {
			t.Fatalf("HoldCount = %d, want %d", m.HoldCount(), i)
		}
	}
	token := m.FencingToken()
	if ok, _ := m.TryLock(ctx, 0); !ok || m.HoldCount() != 4 || m.FencingToken() != token {
		t.Fatalf("TryLock on a held reentrant handle: HoldCount %d, token %d", m.HoldCount(), m.FencingToken())
	}
	for i := 3; i >= 1; i-- {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if m.HoldCount() != i || rdb.Exists(ctx, "lock:re").Val() != 1 {
			t.Fatalf("after an inner Unlock: HoldCount %d, key exists %d", m.HoldCount(), rdb.Exists(ctx, "lock:re").Val())
		}
		if ok, _ := other.NewMutex("lock:re").TryLock(ctx, 0); ok {
			t.Fatal("another client took the lock during an inner Unlock")
		}
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if rdb.Exists(ctx, "lock:re").Val() != 0 || m.HoldCount() != 0 {
		t.Fatal("last Unlock did not release")
	}
}

// A non-reentrant handle's second Lock waits, as sync.Mutex does.
func TestNonReentrantSecondLockWaits(t *testing.T) {
	_, _, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:nonre")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ok, err := m.TryLock(ctx, 100*time.Millisecond)
	if ok || err != nil || m.HoldCount() != 1 {
		t.Fatalf("second TryLock on a held handle = %v, %v (HoldCount %d)", ok, err, m.HoldCount())
	}
	_ = m.Unlock(ctx)
}

// Relocking a reentrant handle confirms the lease in Redis: a stolen key is
// found at once rather than counted.
func TestReentrantRelockDetectsLoss(t *testing.T) {
	_, rdb, c := setup(t, dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second))
	ctx := ctxT(t)
	m := c.NewMutex("lock:re-lost", dlock.WithReentrant())
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "lock:re-lost")
	if err := m.Lock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("relock after the key was deleted = %v, want ErrLockLost", err)
	}
	if !isClosed(m.Done()) || m.HoldCount() != 0 {
		t.Fatal("hold not ended")
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock = %v", err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock after unlocking the lost hold: %v", err)
	}
	_ = m.Unlock(ctx)
}

// After a loss, one Unlock clears a reentrant handle whatever its count.
func TestReentrantUnlockAfterLossClearsHandle(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:re-clear", dlock.WithReentrant())
	for range 3 {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Del(ctx, "lock:re-clear")
	if !closedWithin(m.Done(), renew+time.Second) {
		t.Fatal("loss not reported")
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock = %v, want ErrLockLost", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
	if ok, err := m.TryLock(ctx, time.Second); !ok || err != nil {
		t.Fatalf("TryLock after clearing = %v, %v", ok, err)
	}
	_ = m.Unlock(ctx)
}
