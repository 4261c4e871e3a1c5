package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// Leases of the fault tests: a fault shows within a fraction of a lease
// (client timeouts 200-300ms), and a hold through a fault ends at its
// deadline. Under the latency fault go-redis may open a new connection for
// an acquire or a renewal (dial, HELLO, CLIENT SETINFO, then the script: four
// round trips of 160ms), and the acquire's deadline counts from before that,
// so the lease leaves room for eight such round trips.
const (
	faultLease = 2 * time.Second
	faultRenew = 150 * time.Millisecond
)

// faultEnv is a redis-server, a proxy in front of it, a Client through the
// proxy (the one that suffers the faults) and a Client straight to the server.
type faultEnv struct {
	srv     *testserver.Redis
	admin   *redis.Client
	fp      *faultProxy
	direct  *dlock.Client
	proxied *dlock.Client
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	srv := testserver.StartRedis(t)
	fp := newFaultProxy(t, srv.Addr)
	opts := []dlock.Option{dlock.WithWatchdogTimeout(faultLease), dlock.WithRenewInterval(faultRenew)}
	return &faultEnv{
		srv:     srv,
		admin:   adminClient(t, srv),
		fp:      fp,
		direct:  newClient(t, srv.Client(), opts...),
		proxied: newClient(t, fp.client(srv), opts...),
	}
}

// adminClient connects as the server's default user, for the test's own reads.
func adminClient(t *testing.T, srv *testserver.Redis) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// noOrphan checks that, within one lease after the fault ended, the lock's
// key is gone and another Client can take the lock.
func (e *faultEnv) noOrphan(t *testing.T, name string) {
	t.Helper()
	testserver.WaitFor(t, faultLease+500*time.Millisecond, "no orphan lock one lease after the fault", func() bool {
		return e.admin.Exists(context.Background(), name).Val() == 0
	})
	m := e.direct.NewMutex(name)
	if ok, err := m.TryLock(context.Background(), faultLease); !ok || err != nil {
		t.Fatalf("lock not acquirable after the fault: %v, %v", ok, err)
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Every network fault, injected while waiting, acquiring, holding and
// releasing: the expected outcome, no orphan one lease after the fault ends,
// no leaked goroutine (TestMain), no panic.
func TestNetworkFaults(t *testing.T) {
	for _, f := range faults {
		t.Run(f.name+"/waiting", func(t *testing.T) { faultWhileWaiting(t, f) })
		t.Run(f.name+"/acquiring", func(t *testing.T) { faultWhileAcquiring(t, f) })
		t.Run(f.name+"/holding", func(t *testing.T) { faultWhileHolding(t, f) })
		t.Run(f.name+"/releasing", func(t *testing.T) { faultWhileReleasing(t, f) })
	}
}

// While waiting: the holder releases during the fault, so the waiter cannot
// hear the notice; once the fault ends it acquires within a lease.
func faultWhileWaiting(t *testing.T, f fault) {
	e := newFaultEnv(t)
	name := "fault:wait:" + f.name
	holder := e.direct.NewMutex(name)
	if err := holder.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waiter := e.proxied.NewMutex(name)
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	f.inject(e.fp)
	if err := holder.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the fault lasts a second
	e.fp.heal()
	healed := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(faultLease + 2*time.Second):
		t.Fatal("waiter did not acquire within a lease after the fault ended")
	}
	t.Logf("waiter acquired %v after the fault ended", time.Since(healed))
	if !waiter.IsHeld() {
		t.Fatal("waiter returned without holding")
	}
	if err := waiter.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.noOrphan(t, name)
}

// While acquiring: a slow network only slows the acquire; a broken one makes
// TryLock return the connection error when its wait ends, and anything the
// attempts may have set is gone within a lease after the fault.
func faultWhileAcquiring(t *testing.T, f fault) {
	e := newFaultEnv(t)
	name := "fault:acquire:" + f.name
	m := e.proxied.NewMutex(name)
	f.inject(e.fp)
	start := time.Now()
	ok, err := m.TryLock(context.Background(), 400*time.Millisecond)
	took := time.Since(start)
	switch {
	case f.slow:
		if !ok || err != nil {
			t.Fatalf("TryLock on a slow network = %v, %v", ok, err)
		}
		e.fp.heal()
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	default:
		if ok || err == nil || errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("TryLock on a broken network = %v, %v; want false and the connection error", ok, err)
		}
		// The first attempt always completes, and on a fresh connection
		// go-redis's handshake (HELLO, CLIENT SETINFO) waits for its own
		// timeouts (300ms each here) before the script is even sent.
		if took > 400*time.Millisecond+1500*time.Millisecond {
			t.Fatalf("TryLock(400ms) returned after %v", took)
		}
		e.fp.heal()
	}
	e.noOrphan(t, name)
}

// While holding: a slow network (round trip above the renew interval) keeps
// the hold; a broken one ends it as lost at the lease's deadline, not later,
// and the key is gone within a lease after the fault.
func faultWhileHolding(t *testing.T, f fault) {
	e := newFaultEnv(t)
	name := "fault:hold:" + f.name
	m := e.proxied.NewMutex(name)
	if err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.inject(e.fp)
	injected := time.Now()
	if f.slow {
		for time.Since(injected) < 2*faultLease {
			if !m.IsHeld() {
				t.Fatalf("hold lost on a slow network after %v: %v", time.Since(injected), m.Err())
			}
			time.Sleep(20 * time.Millisecond) // sampling over time
		}
		e.fp.heal()
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.noOrphan(t, name)
		return
	}
	if !closedWithin(m.Done(), faultLease+time.Second) {
		t.Fatal("loss not signalled after the lease")
	}
	if el := time.Since(injected); el > faultLease+300*time.Millisecond {
		t.Fatalf("loss signalled %v after the fault, later than the lease (%v) allows", el, faultLease)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) || m.IsHeld() {
		t.Fatalf("Err = %v, IsHeld = %v", m.Err(), m.IsHeld())
	}
	time.Sleep(500 * time.Millisecond) // the fault lasts a little longer
	e.fp.heal()
	e.noOrphan(t, name)
	if err := m.Unlock(context.Background()); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the loss = %v", err)
	}
}

// While releasing: a slow network only slows Unlock; a broken one makes it
// return the error, and the key is deleted in the background or expires
// within a lease after the fault.
func faultWhileReleasing(t *testing.T, f fault) {
	e := newFaultEnv(t)
	name := "fault:release:" + f.name
	m := e.proxied.NewMutex(name)
	if err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.inject(e.fp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := m.Unlock(ctx)
	cancel()
	if f.slow && err != nil {
		t.Fatalf("Unlock on a slow network: %v", err)
	}
	if !f.slow && err == nil {
		t.Logf("Unlock reached Redis before the %s took effect", f.name)
	}
	if m.IsHeld() || !isClosed(m.Done()) {
		t.Fatal("handle still holds after Unlock")
	}
	e.fp.heal()
	e.noOrphan(t, name)
}
