package integration

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// The Java peer of these tests runs Redisson's own scripts, copied from
// RedissonSemaphore.java (tryAcquireAsync, releaseAsync, trySetPermitsAsync,
// addPermitsAsync): KEYS[1] the semaphore, KEYS[2] its channel
// "redisson_sc:{<name>}".
const (
	rsemPeerTryAcquire = "local value = redis.call('get', KEYS[1]); " +
		"if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then " +
		"local val = redis.call('decrby', KEYS[1], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return 0;"
	rsemPeerRelease = "local value = redis.call('incrby', KEYS[1], ARGV[1]); " +
		"redis.call('publish', KEYS[2], value); "
	rsemPeerTrySetPermits = "local value = redis.call('get', KEYS[1]); " +
		"if (value == false) then " +
		"redis.call('set', KEYS[1], ARGV[1]); " +
		"redis.call('publish', KEYS[2], ARGV[1]); " +
		"return 1;" +
		"end;" +
		"return 0;"
)

// rsemAllowChannels gives the harness's least-privilege user Redisson's
// semaphore and latch channels, which a Client WithRedissonCompat subscribes
// and publishes to (README: the rule's channel patterns).
func rsemAllowChannels(t testing.TB, srv *testserver.Redis) {
	t.Helper()
	err := srv.Admin().Do(context.Background(), "ACL", "SETUSER", testserver.LockUser,
		"&redisson_sc:*", "&redisson_countdownlatch__channel__*").Err()
	if err != nil && !strings.Contains(err.Error(), "after the") { // already allchannels
		t.Fatalf("ACL SETUSER: %v", err)
	}
}

// rsemPeer runs one of Redisson's scripts as the Java peer would.
func rsemPeer(t testing.TB, admin *redis.Client, script string, keys []string, args ...any) int64 {
	t.Helper()
	v, err := admin.Eval(context.Background(), script, keys, args...).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("peer script: %v", err)
	}
	n, _ := v.(int64)
	return n
}

// rsemSubscribe subscribes a peer (an admin connection, as a Java
// RedissonSemaphore's subscription) to channel.
func rsemSubscribe(t testing.TB, admin *redis.Client, channel string) *redis.PubSub {
	t.Helper()
	ps := admin.Subscribe(context.Background(), channel)
	t.Cleanup(func() { _ = ps.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatalf("subscribe %s: %v", channel, err)
	}
	return ps
}

// rsemExpect fails unless the next message on ps, within 5s, is want on
// channel: it also proves no other message came before it.
func rsemExpect(t testing.TB, ps *redis.PubSub, channel, want, after string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("after %s: no message on %s within 5s: %v", after, channel, err)
	}
	if m.Channel != channel || m.Payload != want {
		t.Fatalf("after %s: message %q on %s; want %q on %s (Redisson's)", after, m.Payload, m.Channel, want, channel)
	}
}

// rsemState fails unless the key name is a string holding want with no
// expiry, as RedissonSemaphore keeps it.
func rsemState(t testing.TB, admin *redis.Client, name, want, after string) {
	t.Helper()
	ctx := context.Background()
	if typ := admin.Type(ctx, name).Val(); typ != "string" {
		t.Fatalf("after %s: key %s is a %q; want a string", after, name, typ)
	}
	if v := admin.Get(ctx, name).Val(); v != want {
		t.Fatalf("after %s: key %s holds %q; want %q", after, name, v, want)
	}
	if ttl := admin.Do(ctx, "PTTL", name).Val(); ttl != int64(-1) {
		t.Fatalf("after %s: PTTL of %s = %v; want -1 (no expiry)", after, name, ttl)
	}
}

func rsemClient(t testing.TB, srv *testserver.Redis, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, _ := rsemCountedClient(t, srv, opts...)
	return c
}

// rsemCountedClient is rsemClient with a count of its waiters' attempts.
func rsemCountedClient(t testing.TB, srv *testserver.Redis, opts ...dlock.Option) (*dlock.Client, *rsemEvals) {
	t.Helper()
	rdb := srv.Client()
	h := &rsemEvals{}
	rdb.AddHook(h)
	opts = append([]dlock.Option{dlock.WithRedissonCompat(uuid.NewString()) /* each Client its own id */}, opts...)
	return newClient(t, rdb, opts...), h
}

// rsemEvals is a go-redis hook that counts the scripts and GETs Redis
// answered: a Go waiter's attempts (a latch's are GETs).
type rsemEvals struct{ n atomic.Int64 }

func (h *rsemEvals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *rsemEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *rsemEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); n == "evalsha" || n == "eval" || n == "get" {
			h.n.Add(1)
		}
		return err
	}
}

// rsemGauge counts the permits held at once, by the Go side and the peer.
type rsemGauge struct{ inside, most, total atomic.Int64 }

func (g *rsemGauge) enter() {
	n := g.inside.Add(1)
	for old := g.most.Load(); n > old && !g.most.CompareAndSwap(old, n); old = g.most.Load() {
	}
	g.total.Add(1)
	runtime.Gosched() // give others a chance to enter meanwhile
	g.inside.Add(-1)
}

// Every Go operation leaves exactly what Redisson would: the permits as a
// string at the name, no expiry, and Redisson's messages on
// redisson_sc:{name} (the permits set; the permits available after a release
// or an addPermits, whatever its sign; nothing for an acquire or a refused
// set), which a subscribed Java peer receives. Both sides see each other's
// permits.
func TestRedissonSemaphoreLayoutAndMessages(t *testing.T) {
	srv := testserver.StartRedis(t)
	rsemAllowChannels(t, srv)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name, channel = "rsem:layout", "redisson_sc:{rsem:layout}"
	s := rsemClient(t, srv).NewSemaphore(name)
	peer := rsemSubscribe(t, admin, channel)
	keys := []string{name, channel}

	if ok, err := s.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	rsemState(t, admin, name, "3", "TrySetPermits(3)")
	rsemExpect(t, peer, channel, "3", "TrySetPermits(3)")
	if ok, err := s.TrySetPermits(ctx, 7); ok || err != nil {
		t.Fatalf("second TrySetPermits = %v, %v; want false", ok, err)
	}
	if got := rsemPeer(t, admin, rsemPeerTrySetPermits, keys, 9); got != 0 {
		t.Fatalf("peer trySetPermits on a set semaphore = %d; want 0", got)
	}
	if err := s.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rsemState(t, admin, name, "1", "Acquire(2)")
	// The peer sees the Go side's permits, and the Go side the peer's.
	if got := rsemPeer(t, admin, rsemPeerTryAcquire, []string{name}, 2); got != 0 {
		t.Fatal("peer tryAcquire(2) succeeded with 1 permit left")
	}
	if got := rsemPeer(t, admin, rsemPeerTryAcquire, []string{name}, 1); got != 1 {
		t.Fatal("peer tryAcquire(1) failed with 1 permit left")
	}
	if ok, err := s.TryAcquire(ctx, 1, 0); ok || err != nil {
		t.Fatalf("Go TryAcquire with the peer holding the last permit = %v, %v; want false", ok, err)
	}
	if err := s.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rsemState(t, admin, name, "2", "Release(2)")
	rsemExpect(t, peer, channel, "2", "Release(2) (a refused set and the acquires publish nothing)")
	if err := s.AddPermits(ctx, -3); err != nil {
		t.Fatal(err)
	}
	rsemState(t, admin, name, "-1", "AddPermits(-3)")
	rsemExpect(t, peer, channel, "-1", "AddPermits(-3)")
	if n, err := s.Available(ctx); n != -1 || err != nil {
		t.Fatalf("Available = %d, %v; want -1", n, err)
	}
	rsemPeer(t, admin, rsemPeerRelease, keys, 4)
	rsemExpect(t, peer, channel, "3", "the peer's release(4)")
	if n, err := s.Available(ctx); n != 3 || err != nil {
		t.Fatalf("Available after the peer's release = %d, %v; want 3", n, err)
	}

	// A name with a brace keeps it: Redisson's getChannelName adds none.
	const braced, bracedChannel = "rsem:{tag}:x", "redisson_sc:rsem:{tag}:x"
	peer2 := rsemSubscribe(t, admin, bracedChannel)
	if ok, err := rsemClient(t, srv).NewSemaphore(braced).TrySetPermits(ctx, 0); !ok || err != nil {
		t.Fatalf("TrySetPermits(0) = %v, %v", ok, err)
	}
	rsemState(t, admin, braced, "0", "TrySetPermits(0)")
	rsemExpect(t, peer2, bracedChannel, "0", "TrySetPermits(0) (Redisson publishes 0 too)")
}

// A Go Acquire waiting (10s backoff) is woken by the Java peer's release
// message on redisson_sc:{name} and takes the permit at once; with no
// message, it would sleep 10s. A Go waiter for 2 permits is not fooled by a
// release of 1.
func TestRedissonSemaphoreGoWaiterWokenByPeerRelease(t *testing.T) {
	srv := testserver.StartRedis(t)
	rsemAllowChannels(t, srv)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name, channel = "rsem:wake", "redisson_sc:{rsem:wake}"
	keys := []string{name, channel}
	if rsemPeer(t, admin, rsemPeerTrySetPermits, keys, 0) != 1 {
		t.Fatal("peer trySetPermits(0) refused")
	}
	c, evals := rsemCountedClient(t, srv, slowBackOff())
	s := c.NewSemaphore(name)
	// The waiter has made an attempt and Redisson's channel is subscribed:
	// it is registered for the next message (see waitFor).
	waiting := func(before int64) func() bool {
		return func() bool {
			return evals.n.Load() > before && admin.PubSubNumSub(ctx, channel).Val()[channel] == 1
		}
	}
	for round := range 3 {
		got := make(chan waitResult, 1)
		before := evals.n.Load()
		go func() {
			err := s.Acquire(ctx, 1)
			got <- waitResult{time.Now(), err}
		}()
		testserver.WaitFor(t, 5*time.Second, "the Go waiter's attempt and subscription to Redisson's channel", waiting(before))
		released := time.Now()
		rsemPeer(t, admin, rsemPeerRelease, keys, 1)
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if d := r.at.Sub(released); d > 500*time.Millisecond {
				t.Fatalf("round %d: the Go waiter went %v after the peer's release: not woken by its message", round, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the Go waiter was not woken by the peer's release within 5s (backoff 10s)", round)
		}
		rsemState(t, admin, name, "0", "the Go waiter took the released permit")
	}

	// A waiter for 2 is woken by a release of 1 but goes only when 2 are free.
	got := make(chan error, 1)
	before := evals.n.Load()
	go func() { got <- s.Acquire(ctx, 2) }()
	testserver.WaitFor(t, 5*time.Second, "the Go waiter's attempt and subscription", waiting(before))
	before = evals.n.Load()
	rsemPeer(t, admin, rsemPeerRelease, keys, 1)
	// Woken by the message, it looks again and finds 1 permit: it must wait on.
	testserver.WaitFor(t, 5*time.Second, "the woken waiter's look", func() bool { return evals.n.Load() > before })
	select {
	case err := <-got:
		t.Fatalf("Acquire(2) returned %v with 1 permit free", err)
	default:
	}
	rsemState(t, admin, name, "1", "a release of 1 to a waiter for 2")
	rsemPeer(t, admin, rsemPeerRelease, keys, 1)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Acquire(2) not woken by the release that made 2 permits free")
	}
	rsemState(t, admin, name, "0", "Acquire(2)")
}

// The Go side and the Java peer share the permits under contention: Go
// goroutines on three Clients and a peer loop that takes and gives back
// permits by Redisson's scripts never exceed the permits together, and every
// permit is back at the end.
func TestRedissonSemaphoreSharedWithPeer(t *testing.T) {
	srv := testserver.StartRedis(t)
	rsemAllowChannels(t, srv)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name, channel, permits = "rsem:shared", "redisson_sc:{rsem:shared}", 2
	keys := []string{name, channel}
	if ok, err := rsemClient(t, srv).NewSemaphore(name).TrySetPermits(ctx, permits); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	var g rsemGauge
	done := make(chan error, 16)
	for range 3 {
		s := rsemClient(t, srv).NewSemaphore(name)
		for range 3 {
			go func() {
				for range 10 {
					if err := s.Acquire(ctx, 1); err != nil {
						done <- err
						return
					}
					g.enter()
					if err := s.Release(ctx, 1); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
	}
	go func() { // the Java peer, polling (Redisson would wait for a message)
		for taken := 0; taken < 10; {
			got, err := admin.Eval(ctx, rsemPeerTryAcquire, []string{name}, 1).Int()
			if err != nil {
				done <- err
				return
			}
			if got == 1 {
				taken++
				g.enter()
				if err := admin.Eval(ctx, rsemPeerRelease, keys, 1).Err(); err != nil && err != redis.Nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	for range 10 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("contention did not finish within 20s")
		}
	}
	if most, total := g.most.Load(), g.total.Load(); most > permits || total != 100 {
		t.Fatalf("most permits held at once = %d, entries = %d; want at most %d, 100", most, total, permits)
	}
	rsemState(t, admin, name, "2", "every permit was released")
}
