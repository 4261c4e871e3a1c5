package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// redlockEnv is five independent redis-servers and clients for them with
// short timeouts, so a dead server shows within a fraction of a lease.
type redlockEnv struct {
	srvs    []*testserver.Redis
	clients []redis.UniversalClient
}

func newRedlockEnv(t *testing.T) *redlockEnv {
	t.Helper()
	e := &redlockEnv{}
	for range 5 {
		srv := testserver.StartRedis(t)
		srv.RequireLocal()
		e.srvs = append(e.srvs, srv)
		e.clients = append(e.clients, srv.Client(func(o *redis.Options) {
			o.DialTimeout = 100 * time.Millisecond
			o.ReadTimeout = 200 * time.Millisecond
			o.WriteTimeout = 200 * time.Millisecond
			o.MaxRetries = -1
			o.ContextTimeoutEnabled = true
		}))
	}
	return e
}

// client returns a Redlock Client on the five servers, closed at cleanup.
func (e *redlockEnv) client(t *testing.T, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	opts = append([]dlock.Option{dlock.WithWatchdogTimeout(time.Second), dlock.WithRenewInterval(250 * time.Millisecond)}, opts...)
	c, err := dlock.NewRedlock(e.clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// holders counts the servers whose key name holds a dlock token.
func (e *redlockEnv) holders(name string) int {
	n := 0
	for _, s := range e.srvs {
		if s.Admin().Exists(context.Background(), name).Val() == 1 {
			n++
		}
	}
	return n
}

func TestRedlockLocksOnAMajority(t *testing.T) {
	e := newRedlockEnv(t)
	a, b := e.client(t), e.client(t)
	ctx := ctxT(t)
	m := a.NewMutex("rl:basic")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.holders("rl:basic"); n < 3 {
		t.Fatalf("lock on %d of 5 servers, want a majority", n)
	}
	first := m.FencingToken()
	if ok, err := b.NewMutex("rl:basic").TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("second Redlock client took a held lock: %v, %v", ok, err)
	}
	// Renewed past its lease on the majority.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if !m.IsHeld() {
			t.Fatalf("Redlock hold lost: %v", m.Err())
		}
		time.Sleep(50 * time.Millisecond) // sampling over three leases
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.holders("rl:basic"); n != 0 {
		t.Fatalf("Unlock left the key on %d servers", n)
	}
	m2 := b.NewMutex("rl:basic")
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m2.FencingToken() <= first {
		t.Fatalf("token %d not above %d", m2.FencingToken(), first)
	}
	_ = m2.Unlock(ctx)
}

// Two of five servers killed: locking, renewal and release still work.
func TestRedlockSurvivesTwoDeadServers(t *testing.T) {
	e := newRedlockEnv(t)
	c := e.client(t)
	ctx := ctxT(t)
	m := c.NewMutex("rl:two")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	e.srvs[0].Kill()
	e.srvs[3].Kill()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if !m.IsHeld() {
			t.Fatalf("hold lost with 3 of 5 servers alive: %v", m.Err())
		}
		time.Sleep(50 * time.Millisecond) // sampling over three leases
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with 3 of 5 servers: %v", err)
	}
	other := c.NewMutex("rl:two:new")
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("Lock with 3 of 5 servers: %v", err)
	}
	_ = other.Unlock(ctx)
}

// Three of five killed: holds are reported lost at their deadline and new
// attempts fail with an error matching ErrNoQuorum.
func TestRedlockLosesWithoutMajority(t *testing.T) {
	e := newRedlockEnv(t)
	c := e.client(t)
	ctx := ctxT(t)
	m := c.NewMutex("rl:three")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, i := range []int{1, 2, 4} {
		e.srvs[i].Kill()
	}
	if !closedWithin(m.Done(), 2*time.Second) {
		t.Fatal("loss not signalled without a majority")
	}
	if d := time.Since(killed); d > time.Second+300*time.Millisecond {
		t.Fatalf("loss signalled %v after the kills, past the 1s lease", d)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err = %v", m.Err())
	}
	ok, err := c.NewMutex("rl:three:new").TryLock(ctx, 500*time.Millisecond)
	if ok || !errors.Is(err, dlock.ErrNoQuorum) {
		t.Fatalf("TryLock without a majority = %v, %v; want ErrNoQuorum", ok, err)
	}
	t.Logf("TryLock without a majority: %v", err)
}

// Two contenders on one name do not split the votes forever: each gets the
// lock many times, never both at once.
func TestRedlockContendersDoNotDeadlock(t *testing.T) {
	e := newRedlockEnv(t)
	clients := []*dlock.Client{e.client(t), e.client(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cs criticalSection
	var wg sync.WaitGroup
	for _, c := range clients {
		for range 2 {
			wg.Go(func() {
				for range 10 {
					err := c.WithLock(ctx, "rl:contend", func(context.Context, int64) error {
						cs.enter()
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	cs.check(t, 40)
}

// A fencing token from a later majority is larger even when that majority
// never saw the servers whose counters were ahead: each grant raises its
// majority's counters to the token it took. (Without the raise, servers 2-4
// would hand out tokens from the clock, far below the first one.)
func TestRedlockTokensIncreaseAcrossMajorities(t *testing.T) {
	e := newRedlockEnv(t)
	c := e.client(t)
	ctx := ctxT(t)
	// Push servers 0 and 1 far ahead, as if they had handed out many tokens.
	for _, s := range e.srvs[:2] {
		s.Admin().Set(ctx, fenceKeyOf("rl:fence"), fmt.Sprint(int64(1)<<52), 0)
	}
	m := c.NewMutex("rl:fence")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.FencingToken()
	_ = m.Unlock(ctx)
	// The next majority is servers 2-4 (0 and 1 down), whose own counters
	// were never ahead.
	e.srvs[0].Kill()
	e.srvs[1].Kill()
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m.FencingToken() <= first {
		t.Fatalf("token %d from the second majority not above %d", m.FencingToken(), first)
	}
	_ = m.Unlock(ctx)
}

func fenceKeyOf(name string) string {
	return "dlock:fence:" + noticeChannel(name)[len("dlock:notice:"):]
}
