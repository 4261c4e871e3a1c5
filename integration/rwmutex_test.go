package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/slot"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// rwReaders and rwIntent are an RWMutex's sorted set of readers and its
// waiting writer's intent (dlock:<kind>:{T}:<name>, in the name's slot).
func rwReaders(name string) string { return "dlock:readers:{" + slot.Tag(slot.Of(name)) + "}:" + name }
func rwIntent(name string) string  { return "dlock:wwait:{" + slot.Tag(slot.Of(name)) + "}:" + name }

func zcard(t testing.TB, admin *redis.Client, key string) int64 {
	t.Helper()
	n, err := admin.ZCard(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func exists(t testing.TB, admin *redis.Client, key string) bool {
	t.Helper()
	n, err := admin.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// subscribers waits until the notice channel of name has at least n
// subscribed connections.
func subscribers(t testing.TB, admin *redis.Client, name string, n int64) {
	t.Helper()
	ch := noticeChannel(name)
	testserver.WaitFor(t, 5*time.Second, "waiters' subscriptions", func() bool {
		return admin.PubSubNumSub(context.Background(), ch).Val()[ch] >= n
	})
}

// Many readers hold at once, from several Clients; each gets its own fencing
// token and its own member in the readers' set.
func TestRWMutexManyReadersAcrossClients(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name = "rw:many"
	var held []*dlock.RWMutex
	tokens := map[int64]bool{}
	for range 3 {
		c := newClient(t, srv.Client())
		for range 3 {
			r := c.NewRWMutex(name)
			if ok, err := r.TryRLock(ctx, 0); !ok || err != nil {
				t.Fatalf("reader %d: TryRLock beside %d readers = %v, %v", len(held), len(held), ok, err)
			}
			if !r.IsReadHeld() || r.IsWriteHeld() || r.FencingToken() <= 0 || tokens[r.FencingToken()] {
				t.Fatalf("reader %d: held %v/%v, token %d (seen: %v)", len(held), r.IsReadHeld(), r.IsWriteHeld(), r.FencingToken(), tokens)
			}
			tokens[r.FencingToken()] = true
			held = append(held, r)
		}
	}
	if n := zcard(t, admin, rwReaders(name)); n != 9 {
		t.Fatalf("%d readers in Redis, want 9", n)
	}
	if exists(t, admin, name) {
		t.Fatal("a writer key exists beside readers")
	}
	for _, r := range held {
		if err := r.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		if !isClosed(r.Done()) || r.Err() != nil || r.FencingToken() != 0 {
			t.Fatalf("after RUnlock: done %v, err %v, token %d", isClosed(r.Done()), r.Err(), r.FencingToken())
		}
	}
	if exists(t, admin, rwReaders(name)) {
		t.Fatal("readers' set left behind after every RUnlock")
	}
}

// A writer excludes readers and other writers; readers exclude writers.
func TestRWMutexWriterExcludes(t *testing.T) {
	srv, admin, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	const name = "rw:excl"
	w := a.NewRWMutex(name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.IsWriteHeld() || w.FencingToken() <= 0 {
		t.Fatalf("writer: held %v, token %d", w.IsWriteHeld(), w.FencingToken())
	}
	if v := admin.Get(ctx, name).Val(); len(v) != 36 {
		t.Fatalf("writer key holds %q, want a token", v)
	}
	r, w2 := b.NewRWMutex(name), b.NewRWMutex(name)
	if ok, err := r.TryRLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryRLock beside a writer = %v, %v", ok, err)
	}
	if ok, err := w2.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryLock beside a writer = %v, %v", ok, err)
	}
	if exists(t, admin, rwIntent(name)) {
		t.Fatal("a writer that gave up left its intent")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.TryRLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryRLock after Unlock = %v, %v", ok, err)
	}
	if ok, err := w2.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryLock beside a reader = %v, %v", ok, err)
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := w2.TryLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryLock on a free lock = %v, %v", ok, err)
	}
	if err := w2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Readers that keep overlapping, so that some reader always holds, do not
// starve a writer: once it waits, new readers queue behind it, the holding
// ones leave, and it gets the lock within a bound. No reader holds beside it.
func TestRWMutexWriterNotStarved(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name = "rw:starve"
	var inside, readsDone atomic.Int32
	var writing atomic.Bool
	var violations atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		c := newClient(t, srv.Client())
		for range 3 {
			wg.Go(func() {
				r := c.NewRWMutex(name)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := r.RLock(ctx); err != nil {
						t.Error(err)
						return
					}
					inside.Add(1)
					if writing.Load() {
						violations.Add(1)
					}
					time.Sleep(time.Duration(20+rand.IntN(20)) * time.Millisecond) // the reader's work
					inside.Add(-1)
					readsDone.Add(1)
					if err := r.RUnlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// The readers are in full swing: plenty of reads done, readers holding.
	testserver.WaitFor(t, 10*time.Second, "a stream of readers", func() bool {
		return readsDone.Load() >= 30 && zcard(t, admin, rwReaders(name)) > 0
	})
	w := newClient(t, srv.Client()).NewRWMutex(name)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := w.Lock(wctx); err != nil {
		t.Fatalf("writer starved: %v (reads meanwhile: %d)", err, readsDone.Load())
	}
	took := time.Since(start)
	writing.Store(true)
	if n := inside.Load(); n != 0 {
		t.Errorf("%d readers inside beside the writer", n)
	}
	if n := zcard(t, admin, rwReaders(name)); n != 0 {
		t.Errorf("%d readers in Redis beside the writer", n)
	}
	writing.Store(false)
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("writer got the lock after %v", took)
	if took > 2*time.Second {
		t.Fatalf("writer waited %v among readers holding 20-40ms each", took)
	}
	if violations.Load() != 0 {
		t.Fatalf("%d reads beside the writer", violations.Load())
	}
	// The readers go on after the writer.
	after := readsDone.Load()
	testserver.WaitFor(t, 5*time.Second, "readers after the writer", func() bool { return readsDone.Load() >= after+6 })
}

// Waiters sleeping a 10s backoff step behind a 30s lease are woken by the
// release notice within milliseconds: a writer by RUnlock, and every reader
// waiting in one Client (the first woken passes the wake-up on) by Unlock.
func TestRWMutexWokenByNotice(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	a := newClient(t, srv.Client(), opts...)
	b := newClient(t, srv.Client(), opts...)
	c := newClient(t, srv.Client(), opts...)
	ctx := ctxT(t)
	const name = "rw:wake"
	var worst time.Duration
	for round := range 3 {
		// A writer waits for a reader.
		r := a.NewRWMutex(name)
		if err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		w := b.NewRWMutex(name)
		got := make(chan time.Time, 1)
		go func() {
			if err := w.Lock(ctx); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		subscribers(t, admin, name, 1)
		testserver.WaitFor(t, 5*time.Second, "the writer's intent", func() bool { return exists(t, admin, rwIntent(name)) })
		released := time.Now()
		if err := r.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-got:
			d := at.Sub(released)
			worst = max(worst, d)
			t.Logf("round %d: writer acquired %v after RUnlock", round, d)
		case <-time.After(5 * time.Second):
			t.Fatal("writer not woken by the RUnlock notice within 5s")
		}

		// Four readers, three in one Client, wait for the writer.
		readers := []*dlock.RWMutex{b.NewRWMutex(name), c.NewRWMutex(name), c.NewRWMutex(name), c.NewRWMutex(name)}
		times := make(chan time.Time, len(readers))
		for _, r := range readers {
			go func() {
				if err := r.RLock(ctx); err != nil {
					t.Error(err)
				}
				times <- time.Now()
			}()
		}
		subscribers(t, admin, name, 2)
		released = time.Now()
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for range readers {
			select {
			case at := <-times:
				d := at.Sub(released)
				worst = max(worst, d)
			case <-time.After(5 * time.Second):
				t.Fatal("a reader not woken by the Unlock notice within 5s")
			}
		}
		for _, r := range readers {
			if err := r.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if worst > 200*time.Millisecond {
		t.Fatalf("slowest wake-up %v: notices should wake waiters in milliseconds", worst)
	}
}

// TryRLock and TryLock with a wait give up with (false, nil) when it runs
// out; a writer that gives up withdraws its intent, so readers go at once.
func TestRWMutexTryTimeouts(t *testing.T) {
	srv, admin, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	const name = "rw:timeout"
	w := a.NewRWMutex(name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	r := b.NewRWMutex(name)
	start := time.Now()
	ok, err := r.TryRLock(ctx, 200*time.Millisecond)
	if ok || err != nil {
		t.Fatalf("TryRLock beside a writer = %v, %v", ok, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("TryRLock(200ms) gave up after %v", d)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	ok, err = w.TryLock(ctx, 200*time.Millisecond)
	if ok || err != nil {
		t.Fatalf("TryLock beside a reader = %v, %v", ok, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("TryLock(200ms) gave up after %v", d)
	}
	if exists(t, admin, rwIntent(name)) {
		t.Fatal("the writer that gave up left its intent")
	}
	r2 := a.NewRWMutex(name)
	if ok, err := r2.TryRLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryRLock after the writer gave up = %v, %v", ok, err)
	}
	_ = r2.RUnlock(ctx)
	_ = r.RUnlock(ctx)
}

// A waiting RLock or Lock ends when its context does, with the context's
// error; a writer's intent goes with it.
func TestRWMutexContextCancelWhileWaiting(t *testing.T) {
	srv, admin, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	const name = "rw:cancel"
	w := a.NewRWMutex(name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	r := b.NewRWMutex(name)
	go func() { errc <- r.RLock(rctx) }()
	subscribers(t, admin, name, 1)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("RLock after cancel: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("RLock did not return within 2s of its context's cancel")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	go func() { errc <- w.Lock(wctx) }()
	testserver.WaitFor(t, 5*time.Second, "the writer's intent", func() bool { return exists(t, admin, rwIntent(name)) })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock after cancel: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Lock did not return within 2s of its context's cancel")
	}
	if exists(t, admin, rwIntent(name)) {
		t.Fatal("the cancelled writer left its intent")
	}
	if w.IsWriteHeld() || exists(t, admin, name) {
		t.Fatal("a cancelled Lock holds")
	}
	_ = r.RUnlock(ctx)
}

// A reader whose member an operator removed is reported lost at its next
// renewal; RUnlock says so too, and the handle is free again afterwards.
func TestRWMutexReaderLoss(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	const name = "rw:rloss"
	r := c.NewRWMutex(name)
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	members := admin.ZRange(ctx, rwReaders(name), 0, -1).Val()
	if len(members) != 1 {
		t.Fatalf("readers: %v", members)
	}
	if err := admin.ZRem(ctx, rwReaders(name), members[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(r.Done(), 2*time.Second) {
		t.Fatal("Done not closed after the reader's member was removed")
	}
	if err := r.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", err)
	}
	if r.FencingToken() != 0 || r.IsReadHeld() {
		t.Fatal("a lost read hold still reported held")
	}
	if err := r.RUnlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("RUnlock after loss = %v", err)
	}
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = r.RUnlock(ctx)
}

// A writer whose key an operator overwrote is reported lost.
func TestRWMutexWriterLoss(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	const name = "rw:wloss"
	w := c.NewRWMutex(name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, name, uuid.NewString(), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(w.Done(), 2*time.Second) {
		t.Fatal("Done not closed after the writer's key was overwritten")
	}
	if err := w.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", err)
	}
	if err := w.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after loss = %v", err)
	}
	if admin.Get(ctx, name).Val() == "" {
		t.Fatal("the loss deleted the other owner's key")
	}
}

// With WithLeaseTime, a read or write hold is not renewed: it ends as lost
// when its lease runs out, and Redis forgets it.
func TestRWMutexFixedLeaseExpires(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	r := c.NewRWMutex("rw:fixed:r", dlock.WithLeaseTime(200*time.Millisecond))
	w := c.NewRWMutex("rw:fixed:w", dlock.WithLeaseTime(200*time.Millisecond))
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*dlock.RWMutex{r, w} {
		if !closedWithin(h.Done(), 2*time.Second) {
			t.Fatalf("%s: Done not closed after its fixed lease", h.Name())
		}
		if err := h.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("%s: Err = %v, want ErrLockLost", h.Name(), err)
		}
	}
	testserver.WaitFor(t, 2*time.Second, "the expired holds gone from Redis", func() bool {
		return !exists(t, admin, "rw:fixed:w") && admin.ZCount(ctx, rwReaders("rw:fixed:r"), fmt.Sprint(time.Now().UnixMilli()), "+inf").Val() == 0
	})
	other := c.NewRWMutex("rw:fixed:r")
	if ok, err := other.TryLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryLock after the reader's lease ran out = %v, %v", ok, err)
	}
	_ = other.Unlock(ctx)
}

// The watchdog keeps a reader and a writer alive across many leases.
func TestRWMutexRenewals(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	r := c.NewRWMutex("rw:renew:r")
	w := c.NewRWMutex("rw:renew:w")
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	base := c.Stats().Renewals
	testserver.WaitFor(t, 10*time.Second, "ten renewals (five leases each)", func() bool {
		return c.Stats().Renewals >= base+10
	})
	if isClosed(r.Done()) || isClosed(w.Done()) || !r.IsReadHeld() || !w.IsWriteHeld() {
		t.Fatalf("holds ended: reader %v, writer %v", r.Err(), w.Err())
	}
	now := time.Now().UnixMilli()
	if n := admin.ZCount(ctx, rwReaders("rw:renew:r"), fmt.Sprint(now), "+inf").Val(); n != 1 {
		t.Fatalf("%d live readers in Redis, want 1", n)
	}
	if pttl := admin.PTTL(ctx, "rw:renew:w").Val(); pttl <= 0 {
		t.Fatalf("writer PTTL %v", pttl)
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// The intent of a writer that died keeps new readers out only until it
// expires on the server's clock.
func TestRWMutexDeadWriterIntentExpires(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	const name = "rw:deadintent"
	if err := admin.Set(ctx, rwIntent(name), uuid.NewString(), 500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := c.NewRWMutex(name)
	if ok, err := r.TryRLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryRLock beside a live intent = %v, %v", ok, err)
	}
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("reader got through %v after the intent was written", d)
	if d < 400*time.Millisecond || d > 3*time.Second {
		t.Fatalf("reader got through after %v, want just after the intent's 500ms", d)
	}
	_ = r.RUnlock(ctx)
}

// Three Clients with six goroutines each take random read and write
// sections: never two writers at once, never a reader beside a writer, and
// readers do share.
func TestRWMutexContention(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxT(t)
	const name = "rw:contention"
	var readers, writers, mostReaders, reads, writes atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		c := newClient(t, srv.Client())
		for g := range 6 {
			wg.Go(func() {
				rw := c.NewRWMutex(name)
				rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
				for range 25 {
					if rng.IntN(4) == 0 {
						if err := rw.Lock(ctx); err != nil {
							t.Error(err)
							return
						}
						if n := writers.Add(1); n != 1 {
							t.Errorf("%d writers at once", n)
						}
						if n := readers.Load(); n != 0 {
							t.Errorf("%d readers beside a writer", n)
						}
						time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // the writer's work
						writers.Add(-1)
						writes.Add(1)
						if err := rw.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
						continue
					}
					if err := rw.RLock(ctx); err != nil {
						t.Error(err)
						return
					}
					n := readers.Add(1)
					for old := mostReaders.Load(); n > old && !mostReaders.CompareAndSwap(old, n); old = mostReaders.Load() {
					}
					if w := writers.Load(); w != 0 {
						t.Errorf("a reader beside %d writers", w)
					}
					time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond) // the reader's work
					readers.Add(-1)
					reads.Add(1)
					if err := rw.RUnlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d reads (at most %d at once), %d writes", reads.Load(), mostReaders.Load(), writes.Load())
	if reads.Load()+writes.Load() != 3*6*25 {
		t.Fatalf("%d sections done, want %d", reads.Load()+writes.Load(), 3*6*25)
	}
	if mostReaders.Load() < 2 {
		t.Fatalf("readers never shared the lock (at most %d at once)", mostReaders.Load())
	}
}

// A reentrant handle counts holds of its mode and refuses the other mode; a
// plain handle waits for itself and refuses to unlock a mode it does not hold.
func TestRWMutexReentrancy(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	const name = "rw:reentrant"
	rw := c.NewRWMutex(name, dlock.WithReentrant())
	for range 3 {
		if err := rw.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rw.HoldCount() != 3 || zcard(t, admin, rwReaders(name)) != 1 {
		t.Fatalf("hold count %d, %d readers in Redis; want 3, 1", rw.HoldCount(), zcard(t, admin, rwReaders(name)))
	}
	if err := rw.Lock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("Lock on a reentrant reader = %v, want ErrInvalidArgument", err)
	}
	if err := rw.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock on a reader = %v, want ErrNotHeld", err)
	}
	for i := range 2 {
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		if zcard(t, admin, rwReaders(name)) != 1 || rw.HoldCount() != 2-i {
			t.Fatalf("after %d RUnlocks: count %d", i+1, rw.HoldCount())
		}
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(t, admin, rwReaders(name)) {
		t.Fatal("the last RUnlock left the reader")
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("RUnlock of nothing = %v, want ErrNotHeld", err)
	}

	for range 2 {
		if err := rw.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rw.HoldCount() != 2 {
		t.Fatalf("write hold count %d", rw.HoldCount())
	}
	if err := rw.RLock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("RLock on a reentrant writer = %v, want ErrInvalidArgument", err)
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("RUnlock on a writer = %v, want ErrNotHeld", err)
	}
	if err := rw.Unlock(ctx); err != nil || !exists(t, admin, name) {
		t.Fatalf("first Unlock: %v (key there: %v)", err, exists(t, admin, name))
	}
	if err := rw.Unlock(ctx); err != nil || exists(t, admin, name) {
		t.Fatalf("last Unlock: %v (key there: %v)", err, exists(t, admin, name))
	}

	plain := c.NewRWMutex(name)
	if err := plain.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := plain.TryRLock(ctx, 50*time.Millisecond); ok || err != nil {
		t.Fatalf("second TryRLock on a plain handle = %v, %v; want it to wait for the handle", ok, err)
	}
	if err := plain.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock on a plain reader = %v, want ErrNotHeld", err)
	}
	if err := plain.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Fencing tokens of readers and writers of one name increase together.
func TestRWMutexFencingAcrossModes(t *testing.T) {
	_, _, c := setup(t)
	ctx := ctxT(t)
	rw := c.NewRWMutex("rw:fence")
	var last int64
	for i := range 6 {
		lock, unlock := rw.RLock, rw.RUnlock
		if i%2 == 1 {
			lock, unlock = rw.Lock, rw.Unlock
		}
		if err := lock(ctx); err != nil {
			t.Fatal(err)
		}
		if tok := rw.FencingToken(); tok <= last {
			t.Fatalf("grant %d: token %d not above %d", i, tok, last)
		}
		last = rw.FencingToken()
		if err := unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Data dlock did not write, at the name or at the readers' key, is reported
// as ErrWrongType and left alone.
func TestRWMutexWrongType(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	if err := admin.HSet(ctx, "rw:hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, "rw:string", "not a token", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, rwReaders("rw:readers"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rw:hash", "rw:string", "rw:readers"} {
		rw := c.NewRWMutex(name)
		if err := rw.RLock(ctx); !errors.Is(err, dlock.ErrWrongType) {
			t.Errorf("%s: RLock = %v, want ErrWrongType", name, err)
		}
		if err := rw.Lock(ctx); !errors.Is(err, dlock.ErrWrongType) {
			t.Errorf("%s: Lock = %v, want ErrWrongType", name, err)
		}
	}
	if admin.Get(ctx, "rw:string").Val() != "not a token" || admin.HGet(ctx, "rw:hash", "f").Val() != "v" {
		t.Fatal("foreign data changed")
	}
}

// WithReplicaAck on a server without replicas: every grant is rolled back
// before the call returns ErrNotReplicated, leaving nothing in Redis.
func TestRWMutexReplicaAckRollsBack(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	// WAIT is not in the lock user's rule: lock as the default user.
	c := newClient(t, admin, dlock.WithReplicaAck(1, 50*time.Millisecond))
	ctx := ctxT(t)
	const name = "rw:ack"
	rw := c.NewRWMutex(name)
	if err := rw.RLock(ctx); !errors.Is(err, dlock.ErrNotReplicated) {
		t.Fatalf("RLock without replicas = %v, want ErrNotReplicated", err)
	}
	if exists(t, admin, rwReaders(name)) && zcard(t, admin, rwReaders(name)) != 0 {
		t.Fatal("the unreplicated read grant was not rolled back")
	}
	if err := rw.Lock(ctx); !errors.Is(err, dlock.ErrNotReplicated) {
		t.Fatalf("Lock without replicas = %v, want ErrNotReplicated", err)
	}
	if exists(t, admin, name) || exists(t, admin, rwIntent(name)) {
		t.Fatal("the unreplicated write grant was not rolled back")
	}
	if rw.IsReadHeld() || rw.IsWriteHeld() || rw.FencingToken() != 0 {
		t.Fatal("the handle holds after rolled-back grants")
	}
}

// On a cluster, on a name of each primary: readers share, a writer waits for
// them and is woken by the sharded notice of the last RUnlock, readers are
// woken by the writer's Unlock, and every script stays in the name's slot
// (a CROSSSLOT error would fail them).
func TestRWMutexOnCluster(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	opts := clusterOpts(dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second), slowBackOff())
	a := newClient(t, cl.Client(), opts...)
	b := newClient(t, cl.Client(), opts...)
	ps := cl.Primaries()
	var worst time.Duration
	for _, p := range ps {
		name := namesOn(t, ps, p.Addr, "rw:cluster", 1)[0]
		ch := noticeChannel(name)
		r1, r2 := a.NewRWMutex(name), b.NewRWMutex(name)
		for _, r := range []*dlock.RWMutex{r1, r2} {
			if err := r.RLock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w := b.NewRWMutex(name)
		got := make(chan time.Time, 1)
		go func() {
			if err := w.Lock(ctx); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		testserver.WaitFor(t, 5*time.Second, "the writer's sharded subscription on "+p.Addr, func() bool {
			return subscribersOn(cl, p.Addr, ch) > 0
		})
		if err := r1.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		if err := r2.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-got:
			worst = max(worst, at.Sub(released))
		case <-time.After(5 * time.Second):
			t.Fatalf("writer on %s not woken within 5s", p.Addr)
		}
		rgot := make(chan time.Time, 2)
		for _, r := range []*dlock.RWMutex{r1, r2} {
			go func() {
				if err := r.RLock(ctx); err != nil {
					t.Error(err)
				}
				rgot <- time.Now()
			}()
		}
		testserver.WaitFor(t, 5*time.Second, "the readers' sharded subscriptions on "+p.Addr, func() bool {
			return subscribersOn(cl, p.Addr, ch) > 1
		})
		released = time.Now()
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case at := <-rgot:
				worst = max(worst, at.Sub(released))
			case <-time.After(5 * time.Second):
				t.Fatalf("reader on %s not woken within 5s", p.Addr)
			}
		}
		for _, r := range []*dlock.RWMutex{r1, r2} {
			if err := r.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if worst > 200*time.Millisecond {
		t.Fatalf("slowest wake-up %v: sharded notices should wake waiters in milliseconds", worst)
	}
}
