package integration

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

// The Java peer of these tests runs Redisson's own scripts, copied from
// RedissonCountDownLatch.java (countDownAsync, trySetCountAsync): KEYS[1]
// the latch, KEYS[2] its channel "redisson_countdownlatch__channel__{<name>}";
// ARGV as Redisson passes them (CountDownLatchPubSub.ZERO_COUNT_MESSAGE 0 or
// NEW_COUNT_MESSAGE 1, the count, the publish command).
const (
	rlatchPeerCountDown = "local v = redis.call('decr', KEYS[1]);" +
		"if v <= 0 then redis.call('del', KEYS[1]) end;" +
		"if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;"
	rlatchPeerTrySetCount = "if redis.call('exists', KEYS[1]) == 0 then " +
		"redis.call('set', KEYS[1], ARGV[2]); " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end"
)

func rlatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// Every Go operation leaves exactly what Redisson would, and sends its
// messages: TrySetCount sets a string with no expiry and publishes "1" (a
// refused one publishes nothing); CountDown decrements, and at zero deletes
// the key and publishes "0"; from 0 or below it deletes the key silently. A
// TrySetCount of either side is seen by the other.
func TestRedissonLatchLayoutAndMessages(t *testing.T) {
	srv := testserver.StartRedis(t)
	rsemAllowChannels(t, srv)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name = "rlatch:layout"
	channel := rlatchChannel(name)
	keys := []string{name, channel}
	l := rsemClient(t, srv).NewCountDownLatch(name)
	peer := rsemSubscribe(t, admin, channel)

	if ok, err := l.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	rsemState(t, admin, name, "2", "TrySetCount(2)")
	rsemExpect(t, peer, channel, "1", "TrySetCount(2) (NEW_COUNT_MESSAGE)")
	if got := rsemPeer(t, admin, rlatchPeerTrySetCount, keys, 1, 5, "publish"); got != 0 {
		t.Fatalf("peer trySetCount on a set latch = %d; want 0", got)
	}
	if ok, err := l.TrySetCount(ctx, 5); ok || err != nil {
		t.Fatalf("second TrySetCount = %v, %v; want false", ok, err)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	rsemState(t, admin, name, "1", "CountDown to 1")
	if ok, err := l.TryWait(ctx, 0); ok || err != nil {
		t.Fatalf("TryWait at count 1 = %v, %v; want false", ok, err)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := admin.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the latch's key survived the count-down to 0")
	}
	rsemExpect(t, peer, channel, "0", "CountDown to 0 (ZERO_COUNT_MESSAGE; a refused set and a count-down to 1 publish nothing)")
	if err := l.CountDown(ctx); err != nil { // not set: nothing changes, nothing is sent
		t.Fatal(err)
	}

	// The peer sets the count: the Go side sees it.
	if got := rsemPeer(t, admin, rlatchPeerTrySetCount, keys, 1, 3, "publish"); got != 1 {
		t.Fatal("peer trySetCount on an open latch refused")
	}
	rsemExpect(t, peer, channel, "1", "the peer's trySetCount (and nothing for a count-down of an open latch)")
	if ok, err := l.TrySetCount(ctx, 7); ok || err != nil {
		t.Fatalf("Go TrySetCount over the peer's count = %v, %v; want false", ok, err)
	}
	if n, err := l.Count(ctx); n != 3 || err != nil {
		t.Fatalf("Count = %d, %v; want the peer's 3", n, err)
	}

	// Below zero, as Redisson: a key holding 0 is set for trySetCount (it
	// checks EXISTS) but open for await; a count-down deletes it silently.
	if err := admin.Set(ctx, name, "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.TrySetCount(ctx, 4); ok || err != nil {
		t.Fatalf("TrySetCount over a key holding 0 = %v, %v; want false (Redisson checks EXISTS)", ok, err)
	}
	if ok, err := l.TryWait(ctx, 0); !ok || err != nil {
		t.Fatalf("TryWait at count 0 = %v, %v; want true", ok, err)
	}
	if err := l.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := admin.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("a count-down below zero left the key")
	}
	if ok, err := l.TrySetCount(ctx, 4); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	rsemState(t, admin, name, "4", "TrySetCount(4)")
	rsemExpect(t, peer, channel, "1", "TrySetCount(4) (a count-down below zero publishes nothing)")

	// A name with braces keeps Redisson's extra ones.
	const braced = "rlatch:{tag}"
	peer2 := rsemSubscribe(t, admin, "redisson_countdownlatch__channel__{rlatch:{tag}}")
	lb := rsemClient(t, srv).NewCountDownLatch(braced)
	if ok, err := lb.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	rsemExpect(t, peer2, "redisson_countdownlatch__channel__{rlatch:{tag}}", "1", "TrySetCount of a braced name")
}

// Go waiters on two Clients (10s backoff) are released by the Java peer's
// count-down to zero within milliseconds: its "0" on Redisson's channel wakes
// one per Client, which wakes the next. A "1" of a new count does not
// release them.
func TestRedissonLatchGoWaitReleasedByPeerCountDown(t *testing.T) {
	srv := testserver.StartRedis(t)
	rsemAllowChannels(t, srv)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name, perClient = "rlatch:wake", 2
	channel := rlatchChannel(name)
	keys := []string{name, channel}
	if rsemPeer(t, admin, rlatchPeerTrySetCount, keys, 1, 2, "publish") != 1 {
		t.Fatal("peer trySetCount refused")
	}
	got := make(chan waitResult, 2*perClient)
	var evals []*rsemEvals
	for range 2 {
		c, e := rsemCountedClient(t, srv, slowBackOff())
		evals = append(evals, e)
		l := c.NewCountDownLatch(name)
		for range perClient {
			go func() {
				err := l.Wait(ctx)
				got <- waitResult{time.Now(), err}
			}()
		}
	}
	testserver.WaitFor(t, 5*time.Second, "both Clients subscribed to Redisson's channel", func() bool {
		return admin.PubSubNumSub(ctx, channel).Val()[channel] == 2
	})
	rsemPeer(t, admin, rlatchPeerCountDown, keys, 0, "publish")
	// A new-count message wakes a waiter per Client, which looks (GET) and
	// waits on.
	b0, b1 := evals[0].n.Load(), evals[1].n.Load()
	if err := admin.Publish(ctx, channel, "1").Err(); err != nil {
		t.Fatal(err)
	}
	testserver.WaitFor(t, 5*time.Second, "a look of a woken waiter on each Client", func() bool {
		return evals[0].n.Load() > b0 && evals[1].n.Load() > b1
	})
	select {
	case r := <-got:
		t.Fatalf("a waiter returned (%v) at count 1", r.err)
	default:
	}
	released := time.Now()
	rsemPeer(t, admin, rlatchPeerCountDown, keys, 0, "publish")
	for range 2 * perClient {
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.at.Before(released) {
				t.Fatal("a Go waiter went before the count-down to 0")
			}
			if d := r.at.Sub(released); d > 500*time.Millisecond {
				t.Fatalf("a Go waiter went %v after the peer's count-down to 0: not woken by its message", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not every Go waiter went within 5s of the peer's count-down (backoff 10s)")
		}
	}
	if n := admin.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the peer's count-down to 0 left the key")
	}
}

// A Java waiter (subscribed to Redisson's channel, reading the count as
// RedissonCountDownLatch.await does) is released by the Go side's count-down:
// it receives "0" and then reads 0.
func TestRedissonLatchPeerWaiterReleasedByGoCountDown(t *testing.T) {
	srv := testserver.StartRedis(t)
	rsemAllowChannels(t, srv)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name = "rlatch:peer"
	channel := rlatchChannel(name)
	l := rsemClient(t, srv).NewCountDownLatch(name)
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	peer := rsemSubscribe(t, admin, channel)
	if v := admin.Get(ctx, name).Val(); v != "1" { // the peer's getCount before it waits
		t.Fatalf("peer reads count %q; want 1", v)
	}
	done := make(chan error, 1)
	go func() { done <- l.CountDown(context.Background()) }()
	rsemExpect(t, peer, channel, "0", "the Go count-down to 0")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, err := admin.Exists(ctx, name).Result(); n != 0 || err != nil { // the peer's getCount: 0
		t.Fatalf("EXISTS after the count-down = %d, %v; want 0", n, err)
	}
}
