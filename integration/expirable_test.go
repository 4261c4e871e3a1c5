package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/slot"
	"github.com/dlock-go/dlock/internal/testserver"
)

// permitsKey is the sorted set of an expirable semaphore's permits taken.
func permitsKey(name string) string {
	return "dlock:permits:{" + slot.Tag(slot.Of(name)) + "}:" + name
}

// setPermits sets an expirable semaphore's permits, failing the test if it
// cannot.
func setPermits(t *testing.T, s *dlock.ExpirableSemaphore, n int) {
	t.Helper()
	if ok, err := s.TrySetPermits(ctxT(t), n); !ok || err != nil {
		t.Fatalf("TrySetPermits(%d) = %v, %v", n, ok, err)
	}
}

// A permit with a fixed lease ends when the lease runs out: its holder is
// told (Done, ErrLockLost), and a waiter gets the permit then, woken by the
// lease's end even with a 10s backoff (its sleep is capped by the earliest
// lease).
func TestExpirableSemaphoreFixedLeaseExpires(t *testing.T) {
	srv, rdb, a := setup(t)
	b := newClient(t, srv.Client(), slowBackOff())
	ctx := ctxT(t)
	const name = "psem:fixed"
	holder, waiter := a.NewExpirableSemaphore(name), b.NewExpirableSemaphore(name)
	setPermits(t, holder, 1)
	start := time.Now()
	p, err := holder.Acquire(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsHeld() || p.Err() != nil || p.FencingToken() <= 0 || isClosed(p.Done()) {
		t.Fatalf("new permit: IsHeld=%v Err=%v FencingToken=%d Done closed=%v", p.IsHeld(), p.Err(), p.FencingToken(), isClosed(p.Done()))
	}
	holderToken := p.FencingToken()
	score, err := rdb.ZScore(ctx, permitsKey(name), p.ID()).Result()
	if err != nil {
		t.Fatalf("the permit's member: %v", err)
	}
	if ttl := rdb.PTTL(ctx, permitsKey(name)).Val(); ttl <= 0 || ttl > lease {
		t.Fatalf("permits set PTTL = %v, want in (0, %v]", ttl, lease)
	}
	t.Logf("permit %s expires at server ms %.0f", p.ID(), score)
	q, err := waiter.TryAcquire(ctx, 5*time.Second, 0)
	if err != nil || q == nil {
		t.Fatalf("waiter TryAcquire = %v, %v", q, err)
	}
	took := time.Since(start)
	if took < lease || took > lease+time.Second {
		t.Fatalf("waiter got the permit %v after the holder, want after its lease %v and soon after", took, lease)
	}
	if !closedWithin(p.Done(), time.Second) {
		t.Fatal("expired permit's Done not closed")
	}
	if !errors.Is(p.Err(), dlock.ErrLockLost) || p.IsHeld() || p.FencingToken() != 0 {
		t.Fatalf("expired permit: Err=%v IsHeld=%v FencingToken=%d", p.Err(), p.IsHeld(), p.FencingToken())
	}
	if q.FencingToken() <= holderToken {
		t.Fatalf("waiter's fencing token %d not above the holder's %d", q.FencingToken(), holderToken)
	}
	err = p.Release(ctx)
	if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Release of the expired permit = %v, want ErrLockLost and ErrNotHeld", err)
	}
	if n, err := holder.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available = %d, %v; want 0 (the waiter holds the one permit)", n, err)
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := holder.Available(ctx); n != 1 || err != nil {
		t.Fatalf("Available = %d, %v; want 1", n, err)
	}
}

// A permit taken with lease 0 is renewed by the watchdog across many
// watchdog timeouts (300ms, renewed every 100ms) until Release.
func TestExpirableSemaphoreWatchdogRenewsPermit(t *testing.T) {
	srv, rdb, a := setup(t) // WithWatchdogTimeout(300ms), WithRenewInterval(100ms)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	const name = "psem:renew"
	s := a.NewExpirableSemaphore(name)
	setPermits(t, s, 1)
	p, err := s.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := rdb.ZScore(ctx, permitsKey(name), p.ID()).Val()
	renewals := a.Stats().Renewals
	start := time.Now()
	testserver.WaitFor(t, 5*time.Second, "a second of renewals", func() bool {
		return time.Since(start) > 4*lease && a.Stats().Renewals >= renewals+8
	})
	if !p.IsHeld() || isClosed(p.Done()) || p.Err() != nil {
		t.Fatalf("after %v (watchdog timeout %v): IsHeld=%v Done closed=%v Err=%v", time.Since(start), lease, p.IsHeld(), isClosed(p.Done()), p.Err())
	}
	if score := rdb.ZScore(ctx, permitsKey(name), p.ID()).Val(); score < first+float64((3*lease).Milliseconds()) {
		t.Fatalf("member's expiry %0.f, first %0.f: not extended", score, first)
	}
	if q, err := b.NewExpirableSemaphore(name).TryAcquire(ctx, 0, 0); q != nil || err != nil {
		t.Fatalf("another Client's TryAcquire while the permit is renewed = %v, %v; want nil, nil", q, err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !isClosed(p.Done()) || p.Err() != nil {
		t.Fatalf("after Release: Done closed=%v Err=%v", isClosed(p.Done()), p.Err())
	}
	if err := p.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	if n, err := s.Available(ctx); n != 1 || err != nil {
		t.Fatalf("Available = %d, %v; want 1", n, err)
	}
}

// Only a permit's id releases it: a wrong id gives ErrNotHeld and leaves the
// permit counted; the right id releases it, also from another Client, whose
// holder then finds it gone (ErrLockLost). Fencing tokens increase.
func TestExpirableSemaphoreOnlyIDReleases(t *testing.T) {
	srv, rdb, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	const name = "psem:ids"
	s, other := a.NewExpirableSemaphore(name), b.NewExpirableSemaphore(name)
	setPermits(t, s, 2)
	p1, err := s.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p1.ID() == p2.ID() || p2.FencingToken() <= p1.FencingToken() {
		t.Fatalf("ids %s, %s; tokens %d, %d: want distinct ids and increasing tokens", p1.ID(), p2.ID(), p1.FencingToken(), p2.FencingToken())
	}
	for _, h := range []*dlock.ExpirableSemaphore{s, other} {
		if err := h.Release(ctx, "not-a-permit"); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("Release of a wrong id = %v, want ErrNotHeld", err)
		}
	}
	if n := rdb.ZCard(ctx, permitsKey(name)).Val(); n != 2 {
		t.Fatalf("%d permits taken after wrong-id releases, want 2", n)
	}
	if n, err := s.Available(ctx); n != 0 || err != nil {
		t.Fatalf("Available = %d, %v; want 0", n, err)
	}
	// The holder's own handle releases by id.
	if err := s.Release(ctx, p1.ID()); err != nil {
		t.Fatal(err)
	}
	if !isClosed(p1.Done()) || p1.Err() != nil {
		t.Fatalf("after Release by id: Done closed=%v Err=%v", isClosed(p1.Done()), p1.Err())
	}
	if err := s.Release(ctx, p1.ID()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Release of a released id = %v, want ErrNotHeld", err)
	}
	// Another Client handed the id releases it; the holder learns it is gone.
	if err := other.Release(ctx, p2.ID()); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(p2.Done(), 2*time.Second) || !errors.Is(p2.Err(), dlock.ErrLockLost) {
		t.Fatalf("permit released elsewhere: Done closed=%v Err=%v, want ErrLockLost", isClosed(p2.Done()), p2.Err())
	}
	if n, err := s.Available(ctx); n != 2 || err != nil {
		t.Fatalf("Available = %d, %v; want 2", n, err)
	}
}

// A permit whose member is removed behind its holder's back (ZREM by an
// admin) ends as lost at the next renewal.
func TestExpirableSemaphoreRemovedPermitIsLost(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	const name = "psem:removed"
	s := c.NewExpirableSemaphore(name)
	setPermits(t, s, 1)
	p, err := s.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZRem(ctx, permitsKey(name), p.ID()).Val(); n != 1 {
		t.Fatalf("ZREM removed %d members", n)
	}
	if !closedWithin(p.Done(), 2*time.Second) {
		t.Fatal("Done not closed after the permit was removed")
	}
	if !errors.Is(p.Err(), dlock.ErrLockLost) || p.IsHeld() {
		t.Fatalf("Err = %v, IsHeld = %v; want ErrLockLost, false", p.Err(), p.IsHeld())
	}
	if err := s.Release(ctx, p.ID()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Release of the lost permit's id = %v, want ErrNotHeld", err)
	}
}

// 3 Clients x 6 goroutines share 3 permits, with renewed and fixed leases:
// never more than 3 held at once, and every permit comes back.
func TestExpirableSemaphoreNeverExceedsPermits(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx := ctxT(t)
	const name, permits, rounds = "psem:hammer", 3, 6
	setPermits(t, newClient(t, srv.Client()).NewExpirableSemaphore(name), permits)
	var g permitGauge
	var wg sync.WaitGroup
	for range 3 {
		s := newClient(t, srv.Client()).NewExpirableSemaphore(name)
		for j := range 6 {
			l := time.Duration(0)
			if j%2 == 1 {
				l = 5 * time.Second // fixed, far longer than the work
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					p, err := s.Acquire(ctx, l)
					if err != nil {
						t.Error(err)
						return
					}
					g.enter(1)
					time.Sleep(time.Millisecond) // work while holding the permit
					if g.inside.Load() > permits {
						t.Errorf("%d permits held at once, only %d exist", g.inside.Load(), permits)
					}
					g.leave(1)
					if err := p.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if most := g.most.Load(); most > permits || most < 2 || g.total.Load() != 3*6*rounds {
		t.Fatalf("most permits held at once = %d (want 2..%d), entries = %d (want %d)", most, permits, g.total.Load(), 3*6*rounds)
	}
	if n, err := newClient(t, srv.Client()).NewExpirableSemaphore(name).Available(ctx); n != permits || err != nil {
		t.Fatalf("Available after the run = %d, %v; want %d", n, err, permits)
	}
}

// A waiter with a 10s backoff, behind a holder whose lease is 30s, goes
// within milliseconds of the Release: its notice wakes it.
func TestExpirableSemaphoreWaiterWokenByRelease(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	a := newClient(t, srv.Client(), opts...)
	b := newClient(t, srv.Client(), opts...)
	ctx := ctxT(t)
	const name = "psem:wake"
	holder, waiter := a.NewExpirableSemaphore(name), b.NewExpirableSemaphore(name)
	setPermits(t, holder, 1)
	var worst time.Duration
	for i := range 3 {
		p, err := holder.Acquire(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *dlock.Permit, 1)
		errc := make(chan error, 1)
		go func() {
			q, err := waiter.Acquire(ctx, 0)
			errc <- err
			got <- q
		}()
		testserver.WaitFor(t, 5*time.Second, "the waiter's subscription", func() bool { return noticeSubscribed(ctx, admin, name) })
		released := time.Now()
		if err := holder.Release(ctx, p.ID()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
			d := time.Since(released)
			worst = max(worst, d)
			t.Logf("round %d: waiter acquired %v after the release", i, d)
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by the release within 5s (its backoff step is 10s)")
		}
		if err := (<-got).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if worst > 300*time.Millisecond {
		t.Fatalf("slowest wake-up %v: a notice should wake the waiter in milliseconds", worst)
	}
}

// Adding 3 permits lets 3 waiters of one Client through at once: the notice
// wakes one, and each that got a permit with permits left wakes the next.
func TestExpirableSemaphoreAddPermitsWakesSeveral(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	rdb := srv.Client()
	attempts := countWaiterCalls(rdb, "evalsha", "eval")
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	c := newClient(t, rdb, opts...)
	ctx := ctxT(t)
	const name, waiters = "psem:add", 3
	s := c.NewExpirableSemaphore(name)
	got := make(chan *dlock.Permit, waiters)
	errc := make(chan error, waiters)
	for i := range waiters {
		go func() {
			p, err := s.Acquire(asNthWaiter(ctx, i), 0)
			errc <- err
			got <- p
		}()
	}
	testserver.WaitFor(t, 5*time.Second, "every waiter tried once and the channel is subscribed", func() bool {
		return attempts.tried(waiters) && noticeSubscribed(ctx, admin, name)
	})
	added := time.Now()
	if err := newClient(t, srv.Client()).NewExpirableSemaphore(name).AddPermits(ctx, waiters); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(added); d > 500*time.Millisecond {
				t.Fatalf("a waiter acquired %v after the permits were added: it was not woken", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not every waiter acquired within 5s of adding 3 permits (backoff 10s)")
		}
	}
	for range waiters {
		if err := (<-got).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A waiting Acquire returns when its context ends; a permit is released when
// the context it was acquired with ends.
func TestExpirableSemaphoreContext(t *testing.T) {
	_, rdb, c := setup(t, slowBackOff())
	const name = "psem:ctx"
	s := c.NewExpirableSemaphore(name)
	setPermits(t, s, 1)
	holdCtx, endHold := context.WithCancel(ctxT(t))
	p, err := s.Acquire(holdCtx, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		q, err := s.Acquire(waitCtx, 0)
		if q != nil {
			err = errors.New("got a permit while the only one is held")
		}
		done <- err
	}()
	time.AfterFunc(100*time.Millisecond, cancel)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return within 5s of its context's end")
	}
	endHold()
	if !closedWithin(p.Done(), 2*time.Second) || !errors.Is(p.Err(), context.Canceled) {
		t.Fatalf("after its context ended: Done closed=%v Err=%v; want context.Canceled", isClosed(p.Done()), p.Err())
	}
	ctx := ctxT(t)
	testserver.WaitFor(t, 2*time.Second, "the permit released", func() bool {
		return rdb.ZCard(ctx, permitsKey(name)).Val() == 0
	})
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Release after the context released it = %v, want nil (as Unlock)", err)
	}
}

// TryAcquire gives up when its wait runs out: nil, nil.
func TestExpirableSemaphoreTryAcquireTimesOut(t *testing.T) {
	_, _, c := setup(t)
	ctx := ctxT(t)
	s := c.NewExpirableSemaphore("psem:timeout")
	if q, err := s.TryAcquire(ctx, 0, 0); q != nil || err != nil {
		t.Fatalf("TryAcquire before any set = %v, %v; want nil, nil (no permits)", q, err)
	}
	setPermits(t, s, 1)
	if _, err := s.Acquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	q, err := s.TryAcquire(ctx, 200*time.Millisecond, 0)
	if q != nil || err != nil {
		t.Fatalf("TryAcquire with every permit held = %v, %v; want nil, nil", q, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("TryAcquire returned after %v, want about 200ms", d)
	}
	if ok, err := s.TrySetPermits(ctx, 5); ok || err != nil {
		t.Fatalf("second TrySetPermits = %v, %v; want false", ok, err)
	}
	if err := s.AddPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if q, err := s.TryAcquire(ctx, 0, 0); q == nil || err != nil {
		t.Fatalf("TryAcquire after AddPermits(1) = %v, %v", q, err)
	}
}

// Bad input gives ErrInvalidArgument; a key holding data dlock did not write
// gives ErrWrongType and is not touched.
func TestExpirableSemaphoreBadInputAndForeignData(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	s := c.NewExpirableSemaphore("psem:bad")
	var nilCtx context.Context
	for what, err := range map[string]error{
		"negative lease": func() error { _, err := s.Acquire(ctx, -time.Second); return err }(),
		"negative wait":  func() error { _, err := s.TryAcquire(ctx, -time.Second, 0); return err }(),
		"empty id":       s.Release(ctx, ""),
		"nil context":    func() error { _, err := s.Acquire(nilCtx, 0); return err }(),
		"negative set":   func() error { _, err := s.TrySetPermits(ctx, -1); return err }(),
		"empty name":     func() error { _, err := c.NewExpirableSemaphore("").Acquire(ctx, 0); return err }(),
		"nil Client":     (*dlock.Client)(nil).NewExpirableSemaphore("psem:x").Release(ctx, "x"),
	} {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
		}
	}
	rdb.HSet(ctx, "psem:foreign", "f", "v")
	rdb.Set(ctx, "psem:foreign-string", "hello", 0)
	for _, name := range []string{"psem:foreign", "psem:foreign-string"} {
		f := c.NewExpirableSemaphore(name)
		for what, err := range map[string]error{
			"Acquire":       func() error { _, err := f.Acquire(ctx, 0); return err }(),
			"TryAcquire":    func() error { _, err := f.TryAcquire(ctx, time.Second, 0); return err }(),
			"Available":     func() error { _, err := f.Available(ctx); return err }(),
			"TrySetPermits": func() error { _, err := f.TrySetPermits(ctx, 1); return err }(),
			"AddPermits":    f.AddPermits(ctx, 1),
		} {
			if !errors.Is(err, dlock.ErrWrongType) {
				t.Errorf("%s on %s = %v, want ErrWrongType", what, name, err)
			}
		}
		if n := rdb.Exists(ctx, permitsKey(name)).Val(); n != 0 {
			t.Errorf("permits set of %s created", name)
		}
	}
	if v := rdb.HGetAll(ctx, "psem:foreign").Val(); len(v) != 1 || v["f"] != "v" {
		t.Fatalf("foreign hash changed to %v", v)
	}
	if v := rdb.Get(ctx, "psem:foreign-string").Val(); v != "hello" {
		t.Fatalf("foreign string changed to %q", v)
	}
	_ = c.Close()
	if _, err := s.Acquire(ctx, 0); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
}

// A permit released in the background (its Acquire context ended) announces
// the semaphore's name, not its internal key: a waiter with a 10s backoff and
// 30s leases is woken by that notice in milliseconds.
func TestExpirableSemaphoreBackgroundReleaseWakesWaiter(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	a := newClient(t, srv.Client(), opts...)
	b := newClient(t, srv.Client(), opts...)
	ctx := ctxT(t)
	const name = "psem:background"
	holder, waiter := a.NewExpirableSemaphore(name), b.NewExpirableSemaphore(name)
	setPermits(t, holder, 1)
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	if _, err := holder.Acquire(hctx, 0); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		p, err := waiter.Acquire(ctx, 0)
		if err == nil {
			err = p.Release(ctx)
		}
		got <- err
	}()
	testserver.WaitFor(t, 5*time.Second, "the waiter's subscription", func() bool { return noticeSubscribed(ctx, admin, name) })
	released := time.Now()
	hcancel() // the holder's permit is released by the watchdog, in the background
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the background release")
	}
	if d := time.Since(released); d > 500*time.Millisecond {
		t.Fatalf("waiter went %v after the background release: not woken by its notice", d)
	}
}
