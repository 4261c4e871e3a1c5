package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Waiters on two Clients with a 10s backoff all go within milliseconds of
// the count-down that opens the latch: the notice wakes one per Client, and
// each wakes the next; none goes before.
func TestCountDownLatchReleasesEveryWaiter(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name, perClient = "latch:all", 3
	setter := newClient(t, srv.Client())
	l := setter.NewCountDownLatch(name)
	if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	var counters []*callCounter
	got := make(chan waitResult, 2*perClient)
	var opened sync.Mutex // held until the latch opens: no waiter may go before
	var isOpen bool
	var early int
	for range 2 {
		rdb := srv.Client()
		counters = append(counters, countWaiterCalls(rdb, "get"))
		w := newClient(t, rdb, slowBackOff()).NewCountDownLatch(name)
		for i := range perClient {
			go func() {
				err := w.Wait(asNthWaiter(ctx, i))
				opened.Lock()
				if !isOpen {
					early++
				}
				opened.Unlock()
				got <- waitResult{time.Now(), err}
			}()
		}
	}
	testserver.WaitFor(t, 5*time.Second, "every waiter looked once and the channel is subscribed", func() bool {
		return counters[0].tried(perClient) && counters[1].tried(perClient) && noticeSubscribed(ctx, admin, name)
	})
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Count(ctx); n != 1 || err != nil {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
	opened.Lock()
	isOpen = true
	opened.Unlock()
	released := time.Now()
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 * perClient {
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if d := r.at.Sub(released); d > 500*time.Millisecond {
				t.Fatalf("a waiter went %v after the latch opened: it was not woken", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not every waiter went within 5s of the latch opening (backoff 10s)")
		}
	}
	if early != 0 {
		t.Fatalf("%d waiters went before the count reached 0", early)
	}
	if n := admin.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the latch's key survived its opening")
	}
}

// TrySetCount sets the count only while the latch is not set; CountDown
// counts it down, Count reads it, and an open latch can be set again.
func TestCountDownLatchTrySetCountAndCount(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	l := c.NewCountDownLatch("latch:set")
	if l.Name() != "latch:set" {
		t.Fatalf("Name = %q", l.Name())
	}
	if n, err := l.Count(ctx); n != 0 || err != nil {
		t.Fatalf("Count of an unset latch = %d, %v", n, err)
	}
	if ok, err := l.TryWait(ctx, 0); !ok || err != nil {
		t.Fatalf("TryWait on an unset latch = %v, %v; want true (open)", ok, err)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "latch:set").Val(); n != 0 {
		t.Fatal("CountDown of an unset latch created its key")
	}
	if ok, err := l.TrySetCount(ctx, 3); !ok || err != nil {
		t.Fatalf("first TrySetCount = %v, %v", ok, err)
	}
	if ok, err := l.TrySetCount(ctx, 9); ok || err != nil {
		t.Fatalf("second TrySetCount = %v, %v; want false", ok, err)
	}
	if v := rdb.Get(ctx, "latch:set").Val(); v != "3" {
		t.Fatalf("key holds %q, want 3 (Redisson's layout)", v)
	}
	for want := int64(2); want >= 0; want-- {
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Count(ctx); n != want || err != nil {
			t.Fatalf("Count = %d, %v; want %d", n, err, want)
		}
	}
	if ok, err := l.TryWait(ctx, 0); !ok || err != nil {
		t.Fatalf("TryWait on an open latch = %v, %v", ok, err)
	}
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount on an open latch = %v, %v; want true", ok, err)
	}
}

// TryWait gives up when its wait runs out; a waiting Wait returns when its
// context ends.
func TestCountDownLatchTryWaitTimeoutAndCancel(t *testing.T) {
	_, _, c := setup(t, slowBackOff())
	ctx := ctxT(t)
	l := c.NewCountDownLatch("latch:timeout")
	if _, err := l.TrySetCount(ctx, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if ok, err := l.TryWait(ctx, 200*time.Millisecond); ok || err != nil {
		t.Fatalf("TryWait on a set latch = %v, %v; want false, nil", ok, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("TryWait returned after %v, want about 200ms", d)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Wait(wctx) }()
	time.AfterFunc(100*time.Millisecond, cancel)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return within 5s of its context's end")
	}
	if n, err := l.Count(ctx); n != 1 || err != nil {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
	_ = c.Close()
	if err := l.Wait(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
}

// Bad input gives ErrInvalidArgument; a key holding data dlock did not write
// gives ErrWrongType and is not touched.
func TestCountDownLatchBadInputAndForeignData(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	l := c.NewCountDownLatch("latch:bad")
	var nilCtx context.Context
	for what, err := range map[string]error{
		"TrySetCount(0)":  func() error { _, err := l.TrySetCount(ctx, 0); return err }(),
		"TrySetCount(-1)": func() error { _, err := l.TrySetCount(ctx, -1); return err }(),
		"negative wait":   func() error { _, err := l.TryWait(ctx, -time.Second); return err }(),
		"nil context":     l.Wait(nilCtx),
		"empty name":      c.NewCountDownLatch("").CountDown(ctx),
		"nil Client":      (*dlock.Client)(nil).NewCountDownLatch("latch:x").Wait(ctx),
	} {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
		}
	}
	rdb.Set(ctx, "latch:foreign-string", "hello", 0)
	rdb.RPush(ctx, "latch:foreign-list", "a")
	for _, name := range []string{"latch:foreign-string", "latch:foreign-list"} {
		f := c.NewCountDownLatch(name)
		for what, err := range map[string]error{
			"TrySetCount": func() error { _, err := f.TrySetCount(ctx, 1); return err }(),
			"CountDown":   f.CountDown(ctx),
			"Count":       func() error { _, err := f.Count(ctx); return err }(),
			"Wait":        f.Wait(ctx),
			"TryWait":     func() error { _, err := f.TryWait(ctx, time.Second); return err }(),
		} {
			if !errors.Is(err, dlock.ErrWrongType) {
				t.Errorf("%s on %s = %v, want ErrWrongType", what, name, err)
			}
		}
	}
	if v := rdb.Get(ctx, "latch:foreign-string").Val(); v != "hello" {
		t.Fatalf("foreign string changed to %q", v)
	}
	if v := rdb.LRange(ctx, "latch:foreign-list", 0, -1).Val(); len(v) != 1 || v[0] != "a" {
		t.Fatalf("foreign list changed to %v", v)
	}
}
