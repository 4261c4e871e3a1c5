package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestCloseReleasesEverythingAndRefusesLaterCalls(t *testing.T) {
	srv, rdb, c := setup(t)
	other := newClient(t, srv.Client())
	ctx := ctxT(t)
	names := []string{"lock:c1", "lock:c2", "lock:c3"}
	var ms []*dlock.Mutex
	for _, n := range names {
		m := c.NewMutex(n)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	fixed := c.NewMutex("lock:c4", dlock.WithLeaseTime(time.Minute))
	if err := fixed.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ms = append(ms, fixed)
	// A waiter blocked in Lock returns ErrClosed.
	if err := other.NewMutex("lock:wait").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { waiting <- c.NewMutex("lock:wait").Lock(ctx) }()

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, m := range ms {
		if rdb.Exists(ctx, m.Name()).Val() != 0 {
			t.Fatalf("%s still exists after Close", m.Name())
		}
		if !isClosed(m.Done()) || m.IsHeld() || !errors.Is(m.Err(), dlock.ErrClosed) {
			t.Fatalf("%s after Close: Done closed=%v IsHeld=%v Err=%v", m.Name(), isClosed(m.Done()), m.IsHeld(), m.Err())
		}
		if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Unlock after Close = %v, want ErrClosed", err)
		}
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("waiting Lock = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting Lock did not return after Close")
	}
	if err := c.NewMutex("lock:after").Lock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock after Close = %v, want ErrClosed", err)
	}
	if _, err := c.NewMutex("lock:after").TryLock(ctx, 0); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("TryLock after Close = %v, want ErrClosed", err)
	}
	if err := c.WithLock(ctx, "lock:after", func(context.Context, int64) error { return nil }); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("WithLock after Close = %v, want ErrClosed", err)
	}
	if _, err := c.NewMutex("lock:after").IsLocked(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("IsLocked after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	// The caller's redis client is still open.
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Close closed the caller's redis client: %v", err)
	}
}
