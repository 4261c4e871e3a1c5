package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/slot"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// slowBackOff makes polling useless: only a notice can wake a waiter quickly.
func slowBackOff() dlock.Option {
	return dlock.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Second) })
}

// pubsubConns counts the server's pub/sub connections.
func pubsubConns(t testing.TB, rdb *redis.Client) int {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, " flags=P ") {
			n++
		}
	}
	return n
}

// A waiter is woken by the release notice within milliseconds, far below its
// backoff step (10s) and the holder's lease (30s).
func TestWaiterWokenByReleaseNotice(t *testing.T) {
	srv := testserver.StartRedis(t)
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	a := newClient(t, srv.Client(), opts...)
	b := newClient(t, srv.Client(), opts...)
	admin := srv.Admin()
	ctx := ctxT(t)
	var worst time.Duration
	for i := range 5 {
		holder := a.NewMutex("lock:wake")
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		waiter := b.NewMutex("lock:wake")
		got := make(chan time.Time, 1)
		go func() {
			if err := waiter.Lock(ctx); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		// Wait until the waiter is subscribed (its channel has a subscriber).
		testserver.WaitFor(t, 5*time.Second, "the waiter's subscription", func() bool {
			return admin.PubSubNumSub(ctx, noticeChannel("lock:wake")).Val()[noticeChannel("lock:wake")] > 0
		})
		released := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-got:
			d := at.Sub(released)
			worst = max(worst, d)
			t.Logf("round %d: waiter acquired %v after the release", i, d)
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by the release notice within 5s")
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if worst > 100*time.Millisecond {
		t.Fatalf("slowest wake-up %v: notices should wake a waiter in milliseconds", worst)
	}
}

// 200 waiters on 20 names share one subscription connection per Client, and
// all of them acquire in turn.
func TestManyWaitersShareOneSubscriptionConnection(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	holderC := newClient(t, srv.Client())
	waiterC := newClient(t, srv.Client())
	ctx := ctxT(t)
	var holders []*dlock.Mutex
	for i := range 20 {
		m := holderC.NewMutex(fmt.Sprintf("lock:share:%d", i))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, m)
	}
	var acquired atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := waiterC.WithLock(ctx, fmt.Sprintf("lock:share:%d", i%20), func(context.Context, int64) error {
				acquired.Add(1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	// Every waiter has made its first attempt and subscribed.
	want := map[string]bool{}
	for i := range 20 {
		want[noticeChannel(fmt.Sprintf("lock:share:%d", i))] = true
	}
	testserver.WaitFor(t, 10*time.Second, "the 20 names' channels subscribed", func() bool {
		return len(admin.PubSubChannels(ctx, "dlock:notice:*").Val()) == len(want)
	})
	if n := pubsubConns(t, admin); n != 1 {
		t.Fatalf("%d pub/sub connections for 200 waiters on one Client, want 1", n)
	}
	for _, m := range holders {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if acquired.Load() != 200 {
		t.Fatalf("%d of 200 waiters acquired", acquired.Load())
	}
}

// A dropped subscription connection (CLIENT KILL TYPE pubsub) costs waiters at
// most the rest of a lease: they still acquire, and the subscription comes
// back by itself.
func TestKilledSubscriptionStillAcquiresWithinLease(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	holderC := newClient(t, srv.Client())
	waiterC := newClient(t, srv.Client(), slowBackOff())
	ctx := ctxT(t)
	var holders []*dlock.Mutex
	for i := range 5 {
		m := holderC.NewMutex(fmt.Sprintf("lock:kill:%d", i))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, m)
	}
	done := make(chan time.Time, 10)
	for i := range 10 {
		go func() {
			err := waiterC.WithLock(ctx, fmt.Sprintf("lock:kill:%d", i%5), func(context.Context, int64) error { return nil })
			if err != nil {
				t.Error(err)
			}
			done <- time.Now()
		}()
	}
	testserver.WaitFor(t, 10*time.Second, "the waiters' subscription", func() bool { return pubsubConns(t, admin) == 1 })
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	for _, m := range holders {
		_ = m.Unlock(ctx)
	}
	for range 10 {
		select {
		case at := <-done:
			if d := at.Sub(released); d > lease+time.Second {
				t.Fatalf("a waiter acquired %v after the release, more than a lease (%v)", d, lease)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiters did not acquire after the subscription was killed")
		}
	}
	testserver.WaitFor(t, 10*time.Second, "the subscription to come back", func() bool { return pubsubConns(t, admin) == 1 })
}

// WithoutPubSub: no subscription at all; waiters wait by backoff and the
// holder's PTTL alone, and still acquire.
func TestWithoutPubSubWaitsByBackoff(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	a := newClient(t, srv.Client(), dlock.WithoutPubSub())
	b := newClient(t, srv.Client(), dlock.WithoutPubSub())
	ctx := ctxT(t)
	holder := a.NewMutex("lock:spin")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.NewMutex("lock:spin").Lock(ctx) }()
	time.Sleep(3 * renew) // let the waiter poll a few times (a wait that must not subscribe)
	if n := pubsubConns(t, admin); n != 0 {
		t.Fatalf("%d pub/sub connections WithoutPubSub, want 0", n)
	}
	_ = holder.Unlock(ctx)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not acquire by backoff")
	}
}

// One notice wakes one local waiter of the name; the others keep sleeping.
func TestNoticeWakesOneWaiter(t *testing.T) {
	srv := testserver.StartRedis(t)
	long := []dlock.Option{slowBackOff(), dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second)}
	holderC := newClient(t, srv.Client(), long...)
	ctx := ctxT(t)
	holder := holderC.NewMutex("lock:one")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	rdb := srv.Client()
	rdb.AddHook(countEvals{&attempts})
	waiters := newClient(t, rdb, long...)
	acquired := make(chan *dlock.Mutex, 3)
	for range 3 {
		go func() {
			m := waiters.NewMutex("lock:one")
			if err := m.Lock(ctx); err == nil {
				acquired <- m
			}
		}()
	}
	testserver.WaitFor(t, 5*time.Second, "3 waiters' first two attempts", func() bool { return attempts.Load() >= 6 })
	before := attempts.Load()
	_ = holder.Unlock(ctx)
	first := <-acquired
	// The one woken waiter made one more attempt; the others stayed asleep.
	time.Sleep(50 * time.Millisecond) // not synchronisation: a window in which stray wake-ups would show
	if extra := attempts.Load() - before; extra != 1 {
		t.Fatalf("%d attempts after one release, want 1 (one waiter woken)", extra)
	}
	_ = first.Unlock(ctx)
	second := <-acquired
	_ = second.Unlock(ctx)
	third := <-acquired
	_ = third.Unlock(ctx)
}

// noticeChannel is the channel on which releases of name are announced.
func noticeChannel(name string) string {
	return "dlock:notice:{" + slot.Tag(slot.Of(name)) + "}"
}

// countEvals counts acquire attempts (EVALSHA of the acquire script with 2 keys).
type countEvals struct{ n *atomic.Int32 }

func (h countEvals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h countEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(a) > 3 && fmt.Sprint(a[2]) == "2" &&
			strings.HasPrefix(fmt.Sprint(a[4]), "dlock:fence:") {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
