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
	"github.com/redis/go-redis/v9"
)

// permitGauge counts the goroutines inside a section (holding permits, past a
// latch) and the most ever inside at once.
type permitGauge struct{ inside, most, total atomic.Int64 }

func (g *permitGauge) enter(n int64) {
	v := g.inside.Add(n)
	for old := g.most.Load(); v > old && !g.most.CompareAndSwap(old, v); old = g.most.Load() {
	}
	g.total.Add(1)
}

func (g *permitGauge) leave(n int64) { g.inside.Add(-n) }

// waitResult is when a waiting call returned, and its error.
type waitResult struct {
	at  time.Time
	err error
}

// waiterNumKey marks the context of a waiting call with the waiter's number,
// so that a calls hook counts each waiter's attempts.
type waiterNumKey struct{}

func asNthWaiter(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, waiterNumKey{}, i)
}

// callCounter is a go-redis hook that counts, per waiter (asNthWaiter), the commands
// named in cmds that Redis answered.
type callCounter struct {
	cmds map[string]bool
	mu   sync.Mutex
	n    map[int]int
}

func countWaiterCalls(rdb *redis.Client, cmds ...string) *callCounter {
	c := &callCounter{cmds: map[string]bool{}, n: map[int]int{}}
	for _, name := range cmds {
		c.cmds[name] = true
	}
	rdb.AddHook(c)
	return c
}

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if i, ok := ctx.Value(waiterNumKey{}).(int); ok && c.cmds[cmd.Name()] {
			c.mu.Lock()
			c.n[i]++
			c.mu.Unlock()
		}
		return err
	}
}

// tried reports whether each of waiters 0..n-1 has made at least one attempt.
func (c *callCounter) tried(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range n {
		if c.n[i] == 0 {
			return false
		}
	}
	return true
}

// noticeSubscribed reports whether the notice channel of name has a subscriber.
func noticeSubscribed(ctx context.Context, admin *redis.Client, name string) bool {
	ch := noticeChannel(name)
	return admin.PubSubNumSub(ctx, ch).Val()[ch] > 0
}

// 3 Clients x 8 goroutines share 3 permits, some taking 2 at a time: never
// more than 3 are taken at once, and every permit comes back.
func TestSemaphoreNeverExceedsPermits(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxT(t)
	const permits, rounds = 3, 8
	if ok, err := newClient(t, srv.Client()).NewSemaphore("sem:hammer").TrySetPermits(ctx, permits); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	var g permitGauge
	var wg sync.WaitGroup
	for range 3 {
		c := newClient(t, srv.Client())
		s := c.NewSemaphore("sem:hammer")
		for j := range 8 {
			n := 1 + j%2
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if err := s.Acquire(ctx, n); err != nil {
						t.Error(err)
						return
					}
					g.enter(int64(n))
					time.Sleep(time.Millisecond) // work while holding the permits
					if g.inside.Load() > permits {
						t.Errorf("%d permits held at once, only %d exist", g.inside.Load(), permits)
					}
					g.leave(int64(n))
					if err := s.Release(ctx, n); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if most := g.most.Load(); most > permits || most < 2 || g.total.Load() != 3*8*rounds {
		t.Fatalf("most permits held at once = %d (want 2..%d), entries = %d (want %d)", most, permits, g.total.Load(), 3*8*rounds)
	}
	if n, err := newClient(t, srv.Client()).NewSemaphore("sem:hammer").Available(ctx); n != permits || err != nil {
		t.Fatalf("Available after the run = %d, %v; want %d", n, err, permits)
	}
}

// Acquire and TryAcquire take several permits at once, or none.
func TestSemaphoreAcquireSeveral(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	s := c.NewSemaphore("sem:several")
	if s.Name() != "sem:several" {
		t.Fatalf("Name = %q", s.Name())
	}
	if ok, err := s.TrySetPermits(ctx, 5); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if err := s.Acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Available(ctx); n != 2 || err != nil {
		t.Fatalf("Available = %d, %v; want 2", n, err)
	}
	if ok, err := s.TryAcquire(ctx, 3, 0); ok || err != nil {
		t.Fatalf("TryAcquire(3) with 2 available = %v, %v; want false, nil", ok, err)
	}
	if v := rdb.Get(ctx, "sem:several").Val(); v != "2" {
		t.Fatalf("key holds %q after a failed TryAcquire, want 2 (Redisson's layout: the available permits)", v)
	}
	if ok, err := s.TryAcquire(ctx, 2, 0); !ok || err != nil {
		t.Fatalf("TryAcquire(2) with 2 available = %v, %v", ok, err)
	}
	if err := s.Release(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.TryAcquire(ctx, 5, time.Second); !ok || err != nil {
		t.Fatalf("TryAcquire(5) after Release(5) = %v, %v", ok, err)
	}
	if n, err := s.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available = %d, %v; want 0", n, err)
	}
}

// A waiter on a Client whose backoff is 10s goes within milliseconds of a
// Release: the release's notice wakes it.
func TestSemaphoreWaiterWokenByRelease(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	a := newClient(t, srv.Client())
	b := newClient(t, srv.Client(), slowBackOff())
	ctx := ctxT(t)
	holder, waiter := a.NewSemaphore("sem:wake"), b.NewSemaphore("sem:wake")
	if _, err := holder.TrySetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for i := range 3 {
		if err := holder.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		got := make(chan waitResult, 1)
		go func() {
			err := waiter.Acquire(ctx, 1)
			got <- waitResult{time.Now(), err}
		}()
		testserver.WaitFor(t, 5*time.Second, "the waiter's subscription", func() bool { return noticeSubscribed(ctx, admin, "sem:wake") })
		released := time.Now()
		if err := holder.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			d := r.at.Sub(released)
			worst = max(worst, d)
			t.Logf("round %d: waiter acquired %v after the release", i, d)
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by the release within 5s (its backoff step is 10s)")
		}
		if err := waiter.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if worst > 300*time.Millisecond {
		t.Fatalf("slowest wake-up %v: a notice should wake the waiter in milliseconds", worst)
	}
}

// A Release of 3 permits lets 3 waiters of one Client through at once: the
// notice wakes one, and each that got a permit with permits left wakes the
// next (a 10s backoff would show any waiter left asleep).
func TestSemaphoreReleaseOfSeveralWakesSeveral(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	a := newClient(t, srv.Client())
	rdb := srv.Client()
	attempts := countWaiterCalls(rdb, "evalsha", "eval")
	b := newClient(t, rdb, slowBackOff())
	ctx := ctxT(t)
	holder := a.NewSemaphore("sem:several-waiters")
	if _, err := holder.TrySetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := holder.Acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	const waiters = 3
	s := b.NewSemaphore("sem:several-waiters")
	got := make(chan waitResult, waiters)
	for i := range waiters {
		go func() {
			err := s.Acquire(asNthWaiter(ctx, i), 1)
			got <- waitResult{time.Now(), err}
		}()
	}
	testserver.WaitFor(t, 5*time.Second, "every waiter tried once and the channel is subscribed", func() bool {
		return attempts.tried(waiters) && noticeSubscribed(ctx, admin, "sem:several-waiters")
	})
	released := time.Now()
	if err := holder.Release(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if d := r.at.Sub(released); d > 500*time.Millisecond {
				t.Fatalf("a waiter acquired %v after the release: it was not woken", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not every waiter acquired within 5s of releasing 3 permits (backoff 10s)")
		}
	}
	if n, err := s.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available = %d, %v; want 0", n, err)
	}
}

// TryAcquire gives up when its wait runs out, having taken nothing.
func TestSemaphoreTryAcquireTimesOut(t *testing.T) {
	_, _, c := setup(t)
	ctx := ctxT(t)
	s := c.NewSemaphore("sem:timeout")
	if _, err := s.TrySetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ok, err := s.TryAcquire(ctx, 2, 200*time.Millisecond)
	if ok || err != nil {
		t.Fatalf("TryAcquire(2) with 1 available = %v, %v; want false, nil", ok, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("TryAcquire returned after %v, want about 200ms", d)
	}
	if n, _ := s.Available(ctx); n != 1 {
		t.Fatalf("Available = %d after a timed-out TryAcquire, want 1", n)
	}
}

// A waiting Acquire returns when its context ends, with the context's error,
// and takes nothing; an Acquire on an ended context makes no attempt.
func TestSemaphoreAcquireContextCancel(t *testing.T) {
	_, _, c := setup(t, slowBackOff())
	s := c.NewSemaphore("sem:cancel")
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- s.Acquire(ctx, 1) }() // never set: no permits
	time.AfterFunc(100*time.Millisecond, cancel)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return within 5s of its context's end")
	}
	if err := s.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire on an ended context = %v", err)
	}
	if n, err := s.Available(ctxT(t)); n != 0 || err != nil {
		t.Fatalf("Available = %d, %v; want 0", n, err)
	}
}

// TrySetPermits sets the permits once; AddPermits changes them either way;
// anyone may Release, also permits it never took (no owner, as Redisson).
func TestSemaphoreTrySetPermitsOnceAndAddPermits(t *testing.T) {
	srv, rdb, c := setup(t)
	ctx := ctxT(t)
	s := c.NewSemaphore("sem:set")
	if n, err := s.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available before any set = %d, %v", n, err)
	}
	if ok, err := s.TryAcquire(ctx, 1, 0); ok || err != nil {
		t.Fatalf("TryAcquire before any set = %v, %v; want false (no permits)", ok, err)
	}
	if ok, err := s.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("first TrySetPermits = %v, %v", ok, err)
	}
	if ok, err := s.TrySetPermits(ctx, 7); ok || err != nil {
		t.Fatalf("second TrySetPermits = %v, %v; want false", ok, err)
	}
	if err := s.Acquire(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.TrySetPermits(ctx, 7); ok || err != nil {
		t.Fatalf("TrySetPermits with every permit taken = %v, %v; want false (it is set)", ok, err)
	}
	if err := s.AddPermits(ctx, -2); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Available(ctx); n != -2 || err != nil {
		t.Fatalf("Available after AddPermits(-2) = %d, %v; want -2", n, err)
	}
	if err := s.AddPermits(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, "sem:set").Val(); v != "2" {
		t.Fatalf("key holds %q, want 2", v)
	}
	if ttl := rdb.PTTL(ctx, "sem:set").Val(); ttl != -1 {
		t.Fatalf("PTTL = %v, want none (a semaphore does not expire)", ttl)
	}
	other := newClient(t, srv.Client()).NewSemaphore("sem:set")
	if err := other.Release(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Available(ctx); n != 5 || err != nil {
		t.Fatalf("Available after another Client released 3 = %d, %v; want 5", n, err)
	}
}

// Bad input gives clear ErrInvalidArgument errors and never panics.
func TestSemaphoreBadInput(t *testing.T) {
	_, _, c := setup(t)
	ctx := ctxT(t)
	s := c.NewSemaphore("sem:bad")
	var nilCtx context.Context
	for what, err := range map[string]error{
		"Acquire(0)":            s.Acquire(ctx, 0),
		"Acquire(-1)":           s.Acquire(ctx, -1),
		"TryAcquire(0)":         func() error { _, err := s.TryAcquire(ctx, 0, time.Second); return err }(),
		"TryAcquire wait -1":    func() error { _, err := s.TryAcquire(ctx, 1, -time.Second); return err }(),
		"Release(0)":            s.Release(ctx, 0),
		"TrySetPermits(-1)":     func() error { _, err := s.TrySetPermits(ctx, -1); return err }(),
		"nil context":           s.Acquire(nilCtx, 1),
		"empty name":            c.NewSemaphore("").Release(ctx, 1),
		"reserved name":         c.NewSemaphore("dlock:fence:{x}").Release(ctx, 1),
		"nil Client":            (*dlock.Client)(nil).NewSemaphore("sem:x").Release(ctx, 1),
		"nil Client, Available": func() error { _, err := (*dlock.Client)(nil).NewSemaphore("x").Available(ctx); return err }(),
	} {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
		}
	}
	_ = c.Close()
	if err := s.Acquire(ctx, 1); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
}

// A key holding data dlock did not write gives ErrWrongType and is never
// touched, by any call.
func TestSemaphoreForeignDataUntouched(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	rdb.Set(ctx, "sem:foreign-string", "hello", 0)
	rdb.HSet(ctx, "sem:foreign-hash", "f", "v")
	for _, name := range []string{"sem:foreign-string", "sem:foreign-hash"} {
		s := c.NewSemaphore(name)
		for what, err := range map[string]error{
			"Acquire":       s.Acquire(ctx, 1),
			"TryAcquire":    func() error { _, err := s.TryAcquire(ctx, 1, time.Second); return err }(),
			"Release":       s.Release(ctx, 1),
			"AddPermits":    s.AddPermits(ctx, 1),
			"TrySetPermits": func() error { _, err := s.TrySetPermits(ctx, 1); return err }(),
			"Available":     func() error { _, err := s.Available(ctx); return err }(),
		} {
			if !errors.Is(err, dlock.ErrWrongType) {
				t.Errorf("%s on %s = %v, want ErrWrongType", what, name, err)
			} else if what == "Acquire" {
				t.Logf("%s on %s: %v", what, name, err)
			}
		}
	}
	if v := rdb.Get(ctx, "sem:foreign-string").Val(); v != "hello" {
		t.Fatalf("foreign string changed to %q", v)
	}
	if v := rdb.HGetAll(ctx, "sem:foreign-hash").Val(); len(v) != 1 || v["f"] != "v" {
		t.Fatalf("foreign hash changed to %v", v)
	}
	if ttl := rdb.PTTL(ctx, "sem:foreign-string").Val(); ttl != -1 {
		t.Fatalf("foreign key got an expiry: %v", ttl)
	}
}

// On a Redis Cluster, the three synchronizers work on names of every primary
// (every key of one object in its hash slot), and their waiters are woken by
// sharded notices (SPUBLISH), with a 10s backoff.
func TestSemaphoreFamilyOnCluster(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	a := newClient(t, cl.Client(), opts...)
	b := newClient(t, cl.Client(), opts...)
	ps := cl.Primaries()
	// woken runs wait in a goroutine, waits until it subscribed on addr,
	// runs release, and checks that wait returned soon after.
	woken := func(what, addr, name string, wait func() error, release func() error) {
		t.Helper()
		done := make(chan waitResult, 1)
		go func() {
			err := wait()
			done <- waitResult{time.Now(), err}
		}()
		testserver.WaitFor(t, 5*time.Second, what+": the waiter's sharded subscription on "+addr, func() bool {
			return subscribersOn(cl, addr, noticeChannel(name)) > 0
		})
		released := time.Now()
		if err := release(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("%s: %v", what, r.err)
			}
			if d := r.at.Sub(released); d > 500*time.Millisecond {
				t.Fatalf("%s on %s: waiter went %v after the release", what, addr, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s on %s: waiter not woken within 5s (backoff 10s)", what, addr)
		}
	}
	for _, p := range ps {
		names := namesOn(t, ps, p.Addr, "cluster:sem", 3)

		s, sw := a.NewSemaphore(names[0]), b.NewSemaphore(names[0])
		if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetPermits = %v, %v", ok, err)
		}
		if err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		woken("Semaphore", p.Addr, names[0], func() error { return sw.Acquire(ctx, 1) }, func() error { return s.Release(ctx, 1) })
		if n, err := s.Available(ctx); n != 0 || err != nil {
			t.Fatalf("Available = %d, %v", n, err)
		}

		e, ew := a.NewExpirableSemaphore(names[1]), b.NewExpirableSemaphore(names[1])
		if ok, err := e.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetPermits = %v, %v", ok, err)
		}
		permit, err := e.Acquire(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got *dlock.Permit
		woken("ExpirableSemaphore", p.Addr, names[1], func() (err error) { got, err = ew.Acquire(ctx, 0); return err },
			func() error { return permit.Release(ctx) })
		if got.FencingToken() <= 0 || !got.IsHeld() {
			t.Fatalf("permit on the cluster: token %d, held %v", got.FencingToken(), got.IsHeld())
		}
		if err := ew.Release(ctx, got.ID()); err != nil {
			t.Fatal(err)
		}

		l, lw := a.NewCountDownLatch(names[2]), b.NewCountDownLatch(names[2])
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount = %v, %v", ok, err)
		}
		woken("CountDownLatch", p.Addr, names[2], func() error { return lw.Wait(ctx) }, func() error { return l.CountDown(ctx) })
	}
}
