package integration

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// Redis killed mid-hold: the holder learns of the loss at its lease deadline,
// not before and not much after, without a panic; after a restart that lost
// every key, locking works again and tokens keep increasing.
func TestRedisKilledMidHoldLosesAtDeadline(t *testing.T) {
	srv := testserver.StartRedis(t)
	srv.RequireLocal()
	rdb := srv.Client(func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialTimeout = 50 * time.Millisecond
		o.ReadTimeout = 50 * time.Millisecond
	})
	c := newClient(t, rdb)
	ctx := ctxT(t)
	m := c.NewMutex("lock:killed")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.FencingToken()
	srv.Kill()
	killed := time.Now()
	if !closedWithin(m.Done(), lease+time.Second) {
		t.Fatal("loss not reported after the lease deadline")
	}
	el := time.Since(killed)
	t.Logf("loss reported %v after the kill (lease %v, renew %v)", el, lease, renew)
	if el < lease-renew-renew/2 {
		t.Fatalf("loss reported after %v, before the lease could have run out", el)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) || m.IsHeld() {
		t.Fatalf("Err = %v, IsHeld = %v", m.Err(), m.IsHeld())
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock = %v, want ErrLockLost", err)
	}
	// While Redis is down, TryLock retries until its wait ends, then returns the error.
	start := time.Now()
	ok, err := c.NewMutex("lock:down").TryLock(ctx, 200*time.Millisecond)
	if ok || err == nil || errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("TryLock with Redis down = %v, %v; want false and the connection error", ok, err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > 5*time.Second {
		t.Fatalf("TryLock with Redis down returned after %v", el)
	}

	srv.Restart()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock after restart: %v", err)
	}
	if m.FencingToken() <= before {
		t.Fatalf("token after restart %d not above %d", m.FencingToken(), before)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A server frozen by SIGSTOP answers nothing: the hold ends at its deadline by
// the watchdog's own timer although the renewal call is still blocked.
func TestFrozenRedisLosesAtDeadline(t *testing.T) {
	srv := testserver.StartRedis(t)
	srv.RequireLocal()
	rdb := srv.Client(func(o *redis.Options) { o.ReadTimeout = 5 * time.Second; o.MaxRetries = -1 })
	c := newClient(t, rdb, dlock.WithCloseTimeout(200*time.Millisecond))
	ctx := ctxT(t)
	m := c.NewMutex("lock:frozen")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	paused := time.Now()
	defer srv.Resume()
	if !closedWithin(m.Done(), lease+time.Second) {
		t.Fatal("loss not reported while the server was frozen")
	}
	if el := time.Since(paused); el > lease+500*time.Millisecond {
		t.Fatalf("loss reported %v after the freeze, long after the %v lease", el, lease)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err = %v", m.Err())
	}
	srv.Resume()
	// Once the server answers again the key is gone within one lease.
	admin := srv.Admin()
	testserver.WaitFor(t, 10*time.Second, "the frozen holder's key to go", func() bool {
		n, err := admin.Exists(context.Background(), "lock:frozen").Result()
		return err == nil && n == 0
	})
}

// An acquire whose reply is lost may have set the key: the client deletes it
// in the background, so the lock is free again long before its lease ends.
func TestUnknownAcquireOutcomeIsCleanedUp(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	rdb.AddHook(&loseFirstEvalReply{})
	c := newClient(t, rdb, dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second))
	ctx := ctxT(t)
	m := c.NewMutex("lock:unknown")
	ok, err := m.TryLock(ctx, 0)
	if ok || err == nil {
		t.Fatalf("TryLock with a lost reply = %v, %v; want false and the error", ok, err)
	}
	// The script ran, so the key exists, with a 30s lease: the orphan cleanup
	// deletes it well before that.
	admin := srv.Admin()
	testserver.WaitFor(t, 5*time.Second, "the orphaned key to be deleted", func() bool {
		n, err := admin.Exists(context.Background(), "lock:unknown").Result()
		return err == nil && n == 0
	})
	if ok, err := m.TryLock(ctx, time.Second); !ok || err != nil {
		t.Fatalf("TryLock after cleanup = %v, %v", ok, err)
	}
	_ = m.Unlock(ctx)
}

// loseFirstEvalReply runs the first EVAL/EVALSHA but reports a network error,
// as when a connection drops after the server executed the command.
type loseFirstEvalReply struct{ done atomic.Bool }

func (h *loseFirstEvalReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseFirstEvalReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseFirstEvalReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && err == nil && h.done.CompareAndSwap(false, true) {
			err = errors.New("read tcp: connection reset by peer")
			cmd.SetErr(err)
		}
		return err
	}
}

// A retry after a lost reply keeps its token, finds the key it set, and is
// granted: no orphan, no wait for a lease.
func TestRetryAfterLostReplyIsGranted(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	rdb.AddHook(&loseFirstEvalReply{})
	c := newClient(t, rdb, dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second))
	ctx := ctxT(t)
	m := c.NewMutex("lock:retry-own")
	start := time.Now()
	ok, err := m.TryLock(ctx, 5*time.Second)
	if !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("granted after %v: the retry waited on its own key", el)
	}
	_ = m.Unlock(ctx)
}
