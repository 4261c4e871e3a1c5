package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/google/uuid"
)

// The watchdog keeps a lock alive far beyond its lease, and the key's TTL never
// gets near zero while it does.
func TestWatchdogKeepsLockAliveBeyondFiveLeases(t *testing.T) {
	srv, rdb, c := setup(t)
	other := newClient(t, srv.Client())
	ctx := ctxT(t)
	m := c.NewMutex("lock:alive")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	token := rdb.Get(ctx, "lock:alive").Val()
	start := time.Now()
	minTTL := lease
	for time.Since(start) < 6*lease {
		if !m.IsHeld() || isClosed(m.Done()) {
			t.Fatalf("hold ended after %v: Err = %v", time.Since(start), m.Err())
		}
		if v := rdb.Get(ctx, "lock:alive").Val(); v != token {
			t.Fatalf("after %v the key holds %q, not our token", time.Since(start), v)
		}
		minTTL = min(minTTL, rdb.PTTL(ctx, "lock:alive").Val())
		time.Sleep(10 * time.Millisecond) // sampling the TTL over time, not synchronisation
	}
	if minTTL < lease-2*renew-50*time.Millisecond {
		t.Fatalf("TTL fell to %v: renewals every %v should keep it above %v", minTTL, renew, lease-2*renew)
	}
	if ok, err := other.NewMutex("lock:alive").TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("another client took a renewed lock: %v, %v", ok, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after 6 leases: %v", err)
	}
}

func TestFixedLeaseExpiresWithoutRenewal(t *testing.T) {
	srv, rdb, c := setup(t)
	other := newClient(t, srv.Client())
	ctx := ctxT(t)
	const fixed = 250 * time.Millisecond
	m := c.NewMutex("lock:fixed", dlock.WithLeaseTime(fixed))
	start := time.Now()
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, "lock:fixed").Val(); ttl <= 0 || ttl > fixed {
		t.Fatalf("PTTL = %v, want the fixed lease %v", ttl, fixed)
	}
	if !closedWithin(m.Done(), 2*time.Second) {
		t.Fatal("Done did not close after the fixed lease")
	}
	if el := time.Since(start); el < fixed*9/10 {
		t.Fatalf("hold ended after %v, before its fixed lease of %v", el, fixed)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) || m.IsHeld() || m.FencingToken() != 0 {
		t.Fatalf("Err = %v, IsHeld = %v, FencingToken = %d", m.Err(), m.IsHeld(), m.FencingToken())
	}
	// Nobody renewed it: another client can take it now.
	ok, err := other.NewMutex("lock:fixed").TryLock(ctx, time.Second)
	if !ok || err != nil {
		t.Fatalf("TryLock after the fixed lease = %v, %v", ok, err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after expiry = %v, want ErrLockLost", err)
	}
	if rdb.Exists(ctx, "lock:fixed").Val() != 1 {
		t.Fatal("Unlock of the expired hold deleted the new holder's key")
	}
}

func TestStolenKeyIsReportedLostAndThiefSurvivesUnlock(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:stolen")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	thief := uuid.NewString()
	if err := rdb.Set(ctx, "lock:stolen", thief, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	stolenAt := time.Now()
	// Within one renew interval (plus scheduling slack) the holder knows.
	if !closedWithin(m.Done(), renew+renew/10+200*time.Millisecond) {
		t.Fatalf("loss not reported within a renew interval (%v)", renew)
	}
	t.Logf("loss reported %v after the theft", time.Since(stolenAt))
	if !errors.Is(m.Err(), dlock.ErrLockLost) || m.IsHeld() {
		t.Fatalf("Err = %v, IsHeld = %v", m.Err(), m.IsHeld())
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock = %v, want ErrLockLost", err)
	}
	if v := rdb.Get(ctx, "lock:stolen").Val(); v != thief {
		t.Fatalf("the thief's key now holds %q", v)
	}
	if ttl := rdb.PTTL(ctx, "lock:stolen").Val(); ttl < 50*time.Second {
		t.Fatalf("the thief's TTL was changed to %v", ttl)
	}
}

func TestDeletedKeyIsReportedLost(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:deleted")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "lock:deleted")
	if !closedWithin(m.Done(), renew+renew/10+200*time.Millisecond) {
		t.Fatal("loss not reported within a renew interval")
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", m.Err())
	}
	if rdb.Exists(ctx, "lock:deleted").Val() != 0 {
		t.Fatal("a renewal recreated a deleted key")
	}
}

// One watchdog renews many locks in batches: with a batch size of 7, 50 locks
// stay alive across several leases.
func TestWatchdogRenewsManyLocksInBatches(t *testing.T) {
	_, rdb, c := setup(t, dlock.WithRenewBatchSize(7))
	ctx := ctxT(t)
	var ms []*dlock.Mutex
	for i := range 50 {
		m := c.NewMutex("lock:many:" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	deadline := time.Now().Add(4 * lease)
	for time.Now().Before(deadline) {
		for _, m := range ms {
			if !m.IsHeld() {
				t.Fatalf("%s lost: %v", m.Name(), m.Err())
			}
		}
		time.Sleep(20 * time.Millisecond) // sampling over time
	}
	for _, m := range ms {
		if ttl := rdb.PTTL(ctx, m.Name()).Val(); ttl <= lease-2*renew-50*time.Millisecond {
			t.Fatalf("%s TTL %v: not renewed", m.Name(), ttl)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// WithLock's context ends with cause ErrLockLost on loss, and WithLock reports
// the loss even when the function returns nil.
func TestWithLockReportsLoss(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	err := c.WithLock(ctx, "lock:withlock", func(fctx context.Context, token int64) error {
		if token <= 0 {
			t.Errorf("token = %d", token)
		}
		rdb.Del(context.Background(), "lock:withlock")
		select {
		case <-fctx.Done():
		case <-time.After(5 * time.Second):
			t.Error("fn's context not cancelled after the loss")
			return nil
		}
		if !errors.Is(context.Cause(fctx), dlock.ErrLockLost) {
			t.Errorf("cause = %v, want ErrLockLost", context.Cause(fctx))
		}
		return nil
	})
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("WithLock = %v, want ErrLockLost", err)
	}
}

func TestWithLockReleasesAndReturnsFnError(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	boom := errors.New("boom")
	err := c.WithLock(ctx, "lock:fnerr", func(ctx context.Context, token int64) error {
		if rdb.Exists(ctx, "lock:fnerr").Val() != 1 {
			t.Error("lock not held inside fn")
		}
		return boom
	})
	if !errors.Is(err, boom) || errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("WithLock = %v, want boom only", err)
	}
	if rdb.Exists(ctx, "lock:fnerr").Val() != 0 {
		t.Fatal("WithLock did not release")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic not propagated")
			}
		}()
		_ = c.WithLock(ctx, "lock:fnerr", func(context.Context, int64) error { panic("in fn") })
	}()
	if rdb.Exists(ctx, "lock:fnerr").Val() != 0 {
		t.Fatal("WithLock did not release after a panic")
	}
}
