package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// fairKeys returns a FairMutex's queue (list of waiter ids) and timeouts
// (sorted set) keys: derivedKey("queue"|"qtimeout", name) of fairmutex.go.
func fairKeys(name string) (queue, timeouts string) {
	tag := slot.Tag(slot.Of(name))
	return "dlock:queue:{" + tag + "}:" + name, "dlock:qtimeout:{" + tag + "}:" + name
}

// fairLine reads the line of waiters of a FairMutex, first first.
func fairLine(t testing.TB, admin redis.Cmdable, name string) []string {
	t.Helper()
	q, _ := fairKeys(name)
	ids, err := admin.LRange(context.Background(), q, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// awaitLine waits until the line of name has n waiters, and returns it.
func awaitLine(t testing.TB, admin redis.Cmdable, name string, n int) []string {
	t.Helper()
	var ids []string
	testserver.WaitFor(t, 5*time.Second, fmt.Sprintf("%d waiters in the line of %s", n, name), func() bool {
		ids = fairLine(t, admin, name)
		return len(ids) == n
	})
	return ids
}

// serverMillis reads the server's clock in milliseconds.
func serverMillis(t testing.TB, admin *redis.Client) int64 {
	t.Helper()
	now, err := admin.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// noticeClients are Clients on which only a notice wakes a waiter quickly:
// 30s leases renewed every 10s (a waiter's sleep is capped by the holder's
// remaining lease) and a constant 10s backoff.
func noticeClients(t testing.TB, srv *testserver.Redis, n int, hooks ...redis.Hook) []*dlock.Client {
	t.Helper()
	cs := make([]*dlock.Client, n)
	for i := range cs {
		rdb := srv.Client()
		for _, h := range hooks {
			rdb.AddHook(h)
		}
		cs[i] = newClient(t, rdb, dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second), slowBackOff())
	}
	return cs
}

// fairAttempts counts a Client's attempts at a fair lock: EVALSHA/EVAL of
// fair_acquire.lua (4 keys, the third one the queue).
type fairAttempts struct{ n *atomic.Int32 }

func (h fairAttempts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h fairAttempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h fairAttempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(a) > 5 &&
			fmt.Sprint(a[2]) == "4" && strings.HasPrefix(fmt.Sprint(a[5]), "dlock:queue:") {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// The lock excludes other handles (fair or not) while held; fencing tokens
// increase from one holder to the next.
func TestFairMutexExclusion(t *testing.T) {
	srv, admin, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	const name = "fair:excl"
	fa := a.NewFairMutex(name)
	if fa.Name() != name {
		t.Fatalf("Name = %q", fa.Name())
	}
	if err := fa.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if !fa.IsHeld() || fa.FencingToken() <= 0 || fa.HoldCount() != 1 || isClosed(fa.Done()) || fa.Err() != nil {
		t.Fatalf("after Lock: IsHeld %v, FencingToken %d, HoldCount %d, Done closed %v, Err %v",
			fa.IsHeld(), fa.FencingToken(), fa.HoldCount(), isClosed(fa.Done()), fa.Err())
	}
	first := fa.FencingToken()
	if v := admin.Get(ctx, name).Val(); len(v) != 36 {
		t.Fatalf("lock key holds %q, want a token", v)
	}
	fb := b.NewFairMutex(name)
	if ok, err := fb.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryLock while held = %v, %v", ok, err)
	}
	if ok, err := b.NewMutex(name).TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("Mutex TryLock while the fair lock is held = %v, %v", ok, err)
	}
	if fb.IsHeld() || fb.FencingToken() != 0 || !isClosed(fb.Done()) {
		t.Fatal("a handle that holds nothing reports a hold")
	}
	if err := fb.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock of a handle that holds nothing = %v", err)
	}
	done := fa.Done()
	if err := fa.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !isClosed(done) || fa.IsHeld() || fa.Err() != nil {
		t.Fatalf("after Unlock: Done closed %v, IsHeld %v, Err %v", isClosed(done), fa.IsHeld(), fa.Err())
	}
	if admin.Exists(ctx, name).Val() != 0 {
		t.Fatal("Unlock left the key")
	}
	if ok, err := fb.TryLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryLock once free = %v, %v", ok, err)
	}
	if fb.FencingToken() <= first {
		t.Fatalf("fencing token %d after %d", fb.FencingToken(), first)
	}
	if err := fb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Waiters queued one after another (on 3 Clients) get the lock in the order
// they queued: exactly, since each is in the line before the next starts.
// With a 10s backoff and 30s leases only the release notice addressed to the
// next in line can hand the lock on quickly: every hand-off takes well under
// a second.
func TestFairMutexFIFOOrder(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	cs := noticeClients(t, srv, 3)
	ctx, cancel := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // waiters left behind by a failure end here
	const name, n = "fair:fifo", 6
	holder := cs[0].NewFairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	type grant struct {
		who   int
		at    time.Time
		fence int64
	}
	grants := make(chan grant, n)
	var ids []string
	for i := range n {
		// A wait timeout far above the test's length: a waiter never looks
		// again by itself here, so only notices move the line.
		f := cs[i%3].NewFairMutex(name, dlock.WithFairWaitTimeout(time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Lock(ctx); err != nil {
				if ctx.Err() == nil {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			grants <- grant{i, time.Now(), f.FencingToken()}
			if err := f.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		}()
		ids = awaitLine(t, admin, name, i+1)
	}
	// Every waiter subscribed (one subscription per Client) before the release.
	testserver.WaitFor(t, 5*time.Second, "the waiters' subscriptions", func() bool {
		return admin.PubSubNumSub(ctx, noticeChannel(name)).Val()[noticeChannel(name)] == 3
	})
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	prev, prevFence := released, int64(0)
	for k := range n {
		select {
		case g := <-grants:
			if g.who != k {
				t.Fatalf("grant %d went to waiter %d, want %d (line was %v)", k, g.who, k, ids)
			}
			if d := g.at.Sub(prev); d > time.Second {
				t.Fatalf("hand-off to waiter %d took %v: not woken by its notice", k, d)
			} else {
				t.Logf("hand-off to waiter %d: %v", k, d)
			}
			if g.fence <= prevFence {
				t.Fatalf("waiter %d got fencing token %d after %d", k, g.fence, prevFence)
			}
			prev, prevFence = g.at, g.fence
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d did not get the lock within 5s", k)
		}
	}
	wg.Wait()
	if l := fairLine(t, admin, name); len(l) != 0 {
		t.Fatalf("line after everyone's turn: %v", l)
	}
}

// A release wakes the first waiter in line only: the notice is addressed to
// it ("<name>\n<its id>"), and the other waiters make no attempt.
func TestFairMutexReleaseWakesOnlyHead(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	base := ctxT(t)
	ctx, cancel := context.WithCancel(base) // for the waiters' Lock
	defer cancel()
	const name = "fair:head"
	holder := noticeClients(t, srv, 1)[0].NewFairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	sub := admin.Subscribe(ctx, noticeChannel(name))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 3
	var attempts [n]atomic.Int32
	acquired := make(chan int, n)
	proceed := make([]chan struct{}, n)
	var wg sync.WaitGroup
	for i := range n {
		c := noticeClients(t, srv, 1, fairAttempts{&attempts[i]})[0]
		f := c.NewFairMutex(name, dlock.WithFairWaitTimeout(time.Minute))
		proceed[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Lock(ctx); err != nil {
				if ctx.Err() == nil {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			acquired <- i
			<-proceed[i]
			if err := f.Unlock(base); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		}()
		awaitLine(t, admin, name, i+1)
	}
	defer func() {
		cancel()
		for _, p := range proceed {
			select {
			case <-p:
			default:
				close(p)
			}
		}
		wg.Wait()
	}()
	ids := fairLine(t, admin, name)
	// Each waiter tried once, subscribed, and tried again; then it sleeps 10s.
	testserver.WaitFor(t, 5*time.Second, "two attempts per waiter", func() bool {
		for i := range attempts {
			if attempts[i].Load() < 2 {
				return false
			}
		}
		return true
	})
	var before [n]int32
	for i := range attempts {
		before[i] = attempts[i].Load()
	}
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case who := <-acquired:
		if who != 0 {
			t.Fatalf("waiter %d got the lock first, want 0", who)
		}
		if d := time.Since(released); d > time.Second {
			t.Fatalf("the first waiter got the lock %v after the release", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first waiter was not woken by the release")
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := name + "\n" + ids[0]; msg.Payload != want {
		t.Fatalf("release notice %q, want %q (addressed to the first in line)", msg.Payload, want)
	}
	if got := attempts[0].Load(); got != before[0]+1 {
		t.Fatalf("first waiter made %d attempts after the release, want 1", got-before[0])
	}
	for i := 1; i < n; i++ {
		if got := attempts[i].Load(); got != before[i] {
			t.Fatalf("waiter %d made %d attempts after the release: woken by a notice not meant for it", i, got-before[i])
		}
	}
	if l := fairLine(t, admin, name); len(l) != n-1 || l[0] != ids[1] || l[1] != ids[2] {
		t.Fatalf("line after the hand-off: %v, want %v", l, ids[1:])
	}
}

// A waiter that stops refreshing its place (a crash) is skipped once its
// timeout has passed by the server's clock, and the waiters behind it get the
// lock in order.
func TestFairMutexDeadWaiterSkipped(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	cs := noticeClients(t, srv, 3)
	ctx, cancel := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	const name = "fair:dead"
	queue, timeouts := fairKeys(name)
	holder := cs[0].NewFairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A waiter first in line that will never make another attempt: its
	// timeout is 1.5s ahead on the server's clock.
	const ghostFor = 1500 * time.Millisecond
	ghost := uuid.NewString()
	deadline := serverMillis(t, admin) + ghostFor.Milliseconds()
	pushed := time.Now()
	if err := admin.ZAdd(ctx, timeouts, redis.Z{Score: float64(deadline), Member: ghost}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.RPush(ctx, queue, ghost).Err(); err != nil {
		t.Fatal(err)
	}
	// Real waiters look again every 500ms at most (a third of their timeout).
	type grant struct {
		who int
		at  time.Time
	}
	grants := make(chan grant, 2)
	for i := range 2 {
		f := cs[1+i].NewFairMutex(name, dlock.WithFairWaitTimeout(1500*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Lock(ctx); err != nil {
				if ctx.Err() == nil {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			grants <- grant{i, time.Now()}
			_ = f.Unlock(ctx)
		}()
		awaitLine(t, admin, name, i+2)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		select {
		case g := <-grants:
			if g.who != k {
				t.Fatalf("grant %d went to waiter %d", k, g.who)
			}
			if k == 0 {
				waited := g.at.Sub(pushed)
				t.Logf("first real waiter got the lock %v after the ghost was queued", waited)
				if waited < ghostFor-100*time.Millisecond {
					t.Fatalf("the waiter behind the ghost got the lock after %v, before the ghost's timeout (%v)", waited, ghostFor)
				}
				// Its timeout, then at most one poll (500ms), with room for a slow machine.
				if waited > ghostFor+1500*time.Millisecond {
					t.Fatalf("the waiter behind the ghost got the lock only %v after it was queued", waited)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d did not get the lock", k)
		}
	}
	wg.Wait()
	if l := fairLine(t, admin, name); len(l) != 0 {
		t.Fatalf("line at the end: %v", l)
	}
	if admin.ZScore(ctx, timeouts, ghost).Err() != redis.Nil {
		t.Fatal("the ghost's timeout was left behind")
	}
}

// A waiter whose context ends, or whose Client closes, leaves the line at
// once; the others keep their places and get the lock.
func TestFairMutexCancelledWaiterLeavesQueue(t *testing.T) {
	srv, admin, a := setup(t)
	ctx := ctxT(t)
	const name = "fair:cancel"
	_, timeouts := fairKeys(name)
	holder := a.NewFairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 1)
	go func() { errs <- newClient(t, srv.Client()).NewFairMutex(name).Lock(wctx) }()
	awaitLine(t, admin, name, 1)

	closing := newClient(t, srv.Client())
	closedErr := make(chan error, 1)
	go func() { closedErr <- closing.NewFairMutex(name).Lock(ctx) }()
	awaitLine(t, admin, name, 2)

	staying := newClient(t, srv.Client()).NewFairMutex(name)
	stayed := make(chan error, 1)
	go func() { stayed <- staying.Lock(ctx) }()
	ids := awaitLine(t, admin, name, 3)

	cancel()
	select {
	case err := <-errs:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled Lock did not return")
	}
	if l := fairLine(t, admin, name); len(l) != 2 || l[0] != ids[1] || l[1] != ids[2] {
		t.Fatalf("line after the cancel: %v, want %v", l, ids[1:])
	}
	if admin.ZScore(ctx, timeouts, ids[0]).Err() != redis.Nil {
		t.Fatal("the cancelled waiter's timeout is still there")
	}

	if err := closing.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-closedErr:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Lock on a closed Client = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not return when its Client closed")
	}
	if l := fairLine(t, admin, name); len(l) != 1 || l[0] != ids[2] {
		t.Fatalf("line after the Close: %v, want %v", l, ids[2:])
	}

	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stayed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the remaining waiter did not get the lock")
	}
	if err := staying.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// When the first in line gives up while the lock is free, it passes its turn
// on with a notice to the next, which gets the lock at once (10s backoff, 30s
// leases: only that notice can wake it). Meanwhile nobody can jump the line:
// TryLock(ctx, 0) fails while the lock is free but another waiter is first.
func TestFairMutexGivingUpHeadWakesNext(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	cs := noticeClients(t, srv, 3)
	ctx := ctxT(t)
	const name = "fair:handover"
	holder := cs[0].NewFairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		first <- cs[1].NewFairMutex(name, dlock.WithFairWaitTimeout(time.Minute)).Lock(wctx)
	}()
	awaitLine(t, admin, name, 1)
	second := cs[2].NewFairMutex(name, dlock.WithFairWaitTimeout(time.Minute))
	got := make(chan time.Time, 1)
	go func() {
		if err := second.Lock(ctx); err != nil {
			return // reported as "not told" below
		}
		got <- time.Now()
	}()
	awaitLine(t, admin, name, 2)
	testserver.WaitFor(t, 5*time.Second, "the waiters' subscriptions", func() bool {
		return admin.PubSubNumSub(ctx, noticeChannel(name)).Val()[noticeChannel(name)] == 2
	})

	// The lock becomes free without a notice: the first in line sleeps on.
	if err := admin.Del(ctx, name).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := cs[0].NewFairMutex(name).TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryLock(0) jumping the line = %v, %v", ok, err)
	}
	if l := fairLine(t, admin, name); len(l) != 2 {
		t.Fatalf("TryLock(0) changed the line: %v", l)
	}

	gaveUp := time.Now()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first waiter: %v", err)
	}
	select {
	case at := <-got:
		if d := at.Sub(gaveUp); d > time.Second {
			t.Fatalf("the next waiter got the lock %v after the first gave up", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the next waiter was not told it is first in line")
	}
	if !second.IsHeld() {
		t.Fatal("second waiter does not hold the lock")
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := holder.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of the deleted hold = %v, want ErrLockLost", err)
	}
}

// TryLock with a wait returns false and no error when the wait runs out, and
// leaves nothing in the line; TryLock with no wait does not queue at all.
func TestFairMutexTryLockTimeout(t *testing.T) {
	srv, admin, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	const name = "fair:timeout"
	queue, timeouts := fairKeys(name)
	holder := a.NewFairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	f := b.NewFairMutex(name)
	if ok, err := f.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryLock(0) = %v, %v", ok, err)
	}
	if admin.Exists(ctx, queue, timeouts).Val() != 0 {
		t.Fatal("TryLock(0) queued")
	}
	const wait = 400 * time.Millisecond
	start := time.Now()
	ok, err := f.TryLock(ctx, wait)
	took := time.Since(start)
	if ok || err != nil {
		t.Fatalf("TryLock(%v) = %v, %v", wait, ok, err)
	}
	if took < wait || took > wait+time.Second {
		t.Fatalf("TryLock(%v) took %v", wait, took)
	}
	if l := fairLine(t, admin, name); len(l) != 0 {
		t.Fatalf("line after the timeout: %v", l)
	}
	if n := admin.ZCard(ctx, timeouts).Val(); n != 0 {
		t.Fatalf("%d timeouts left after the timeout", n)
	}
	if f.IsHeld() || !holder.IsHeld() {
		t.Fatal("holder changed")
	}
	// Once free, a TryLock with a wait gets it.
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.TryLock(ctx, wait); !ok || err != nil {
		t.Fatalf("TryLock on a free lock = %v, %v", ok, err)
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A hold whose key is stolen or deleted ends as lost: Done closes, Err and
// Unlock match ErrLockLost. A fixed lease (WithLeaseTime) ends likewise.
func TestFairMutexLoss(t *testing.T) {
	srv, admin, c := setup(t)
	ctx := ctxT(t)

	t.Run("stolen", func(t *testing.T) {
		f := c.NewFairMutex("fair:stolen")
		if err := f.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := admin.Set(ctx, "fair:stolen", uuid.NewString(), 0).Err(); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(f.Done(), 2*time.Second) {
			t.Fatal("Done did not close after the key was stolen")
		}
		if !errors.Is(f.Err(), dlock.ErrLockLost) || f.IsHeld() || f.FencingToken() != 0 {
			t.Fatalf("Err = %v, IsHeld = %v, FencingToken = %d", f.Err(), f.IsHeld(), f.FencingToken())
		}
		if err := f.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("Unlock after loss = %v", err)
		}
		if admin.Exists(ctx, "fair:stolen").Val() != 1 {
			t.Fatal("the thief's key was deleted")
		}
	})

	t.Run("deleted", func(t *testing.T) {
		f := c.NewFairMutex("fair:deleted")
		if err := f.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := admin.Del(ctx, "fair:deleted").Err(); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(f.Done(), 2*time.Second) {
			t.Fatal("Done did not close after the key was deleted")
		}
		if !errors.Is(f.Err(), dlock.ErrLockLost) {
			t.Fatalf("Err = %v", f.Err())
		}
		if err := f.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("Unlock after loss = %v", err)
		}
		// The handle is free for the next Lock.
		if ok, err := f.TryLock(ctx, time.Second); !ok || err != nil {
			t.Fatalf("TryLock after loss = %v, %v", ok, err)
		}
		if err := f.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fixed lease", func(t *testing.T) {
		const fixed = 250 * time.Millisecond
		f := c.NewFairMutex("fair:fixed", dlock.WithLeaseTime(fixed))
		start := time.Now()
		if err := f.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if ttl := admin.PTTL(ctx, "fair:fixed").Val(); ttl <= 0 || ttl > fixed {
			t.Fatalf("PTTL = %v, want the fixed lease %v", ttl, fixed)
		}
		// A waiter behind it gets the lock once the lease has run out.
		w := newClient(t, srv.Client()).NewFairMutex("fair:fixed")
		got := make(chan error, 1)
		go func() { got <- w.Lock(ctx) }()
		if !closedWithin(f.Done(), 2*time.Second) {
			t.Fatal("Done did not close after the fixed lease")
		}
		if el := time.Since(start); el < fixed*9/10 {
			t.Fatalf("hold ended after %v, before its lease of %v", el, fixed)
		}
		if !errors.Is(f.Err(), dlock.ErrLockLost) {
			t.Fatalf("Err = %v", f.Err())
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter did not get the lock after the lease ran out")
		}
		if err := f.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("Unlock after expiry = %v", err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The watchdog keeps a hold alive across many leases.
func TestFairMutexRenewals(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	f := c.NewFairMutex("fair:renew")
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	token := f.FencingToken()
	deadline := time.Now().Add(5 * lease)
	for time.Now().Before(deadline) {
		if !f.IsHeld() {
			t.Fatalf("lost after %v: %v", 5*lease-time.Until(deadline), f.Err())
		}
		if ttl := admin.PTTL(ctx, "fair:renew").Val(); ttl <= 0 {
			t.Fatalf("PTTL = %v", ttl)
		}
		time.Sleep(20 * time.Millisecond) // sampling over time, not synchronisation
	}
	if isClosed(f.Done()) || f.FencingToken() != token {
		t.Fatal("the hold changed while renewed")
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A reentrant handle counts its holds; only the last Unlock releases.
func TestFairMutexReentrant(t *testing.T) {
	srv, admin, c := setup(t)
	ctx := ctxT(t)
	const name = "fair:reentrant"
	f := c.NewFairMutex(name, dlock.WithReentrant())
	for range 3 {
		if err := f.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f.HoldCount() != 3 {
		t.Fatalf("HoldCount = %d", f.HoldCount())
	}
	other := newClient(t, srv.Client()).NewFairMutex(name)
	for i := 3; i > 1; i-- {
		if err := f.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := other.TryLock(ctx, 0); ok || err != nil {
			t.Fatalf("TryLock with %d holds left = %v, %v", i-1, ok, err)
		}
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if admin.Exists(ctx, name).Val() != 0 {
		t.Fatal("the last Unlock left the key")
	}
}

// Bad input and foreign data give clear errors, never a panic.
func TestFairMutexInvalidInput(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	for what, f := range map[string]*dlock.FairMutex{
		"empty name":           c.NewFairMutex(""),
		"fence prefix":         c.NewFairMutex("dlock:fence:x"),
		"zero lease":           c.NewFairMutex("fair:x", dlock.WithLeaseTime(0)),
		"zero wait timeout":    c.NewFairMutex("fair:x", dlock.WithFairWaitTimeout(0)),
		"negative wait, later": c.NewFairMutex("fair:x", dlock.WithFairWaitTimeout(time.Second), dlock.WithFairWaitTimeout(-1)),
		"nil client":           (*dlock.Client)(nil).NewFairMutex("fair:x"),
	} {
		if err := f.Lock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: Lock = %v", what, err)
		}
		if err := f.Unlock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: Unlock = %v", what, err)
		}
	}
	if f := c.NewFairMutex("fair:x", dlock.WithFairWaitTimeout(2*time.Second), dlock.WithLeaseTime(time.Second)); f.WaitTimeout() != 2*time.Second {
		t.Errorf("WaitTimeout = %v", f.WaitTimeout())
	}
	if err := c.NewMutex("fair:x", dlock.WithFairWaitTimeout(time.Second)).Lock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Mutex with WithFairWaitTimeout: Lock = %v", err)
	}
	f := c.NewFairMutex("fair:x")
	//lint:ignore SA1012 testing the nil-context check
	if err := f.Lock(nil); !errors.Is(err, dlock.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("Lock(nil) = %v", err)
	}
	if ok, err := f.TryLock(ctx, -time.Second); ok || !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("TryLock(-1s) = %v, %v", ok, err)
	}
	if err := admin.HSet(ctx, "fair:hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.NewFairMutex("fair:hash").Lock(ctx); !errors.Is(err, dlock.ErrWrongType) {
		t.Errorf("Lock on a hash = %v, want ErrWrongType", err)
	}
	if l := fairLine(t, admin, "fair:hash"); len(l) != 0 {
		t.Errorf("a failed Lock left the line %v", l)
	}
}

// 3 Clients x 5 goroutines contend: never two holders at once, every Lock
// succeeds, fencing tokens strictly increase, and the line ends empty.
func TestFairMutexContention(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	const name, clients, workers, rounds = "fair:contention", 3, 5, 8
	var (
		holders, most atomic.Int32
		total         atomic.Int32
		mu            sync.Mutex
		lastFence     int64
		wg            sync.WaitGroup
	)
	for range clients {
		c := newClient(t, srv.Client())
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := c.NewFairMutex(name)
				for range rounds {
					if err := f.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					h := holders.Add(1)
					for {
						m := most.Load()
						if h <= m || most.CompareAndSwap(m, h) {
							break
						}
					}
					mu.Lock()
					if tok := f.FencingToken(); tok <= lastFence {
						t.Errorf("fencing token %d after %d", tok, lastFence)
					} else {
						lastFence = tok
					}
					mu.Unlock()
					time.Sleep(time.Millisecond) // widen the critical section
					holders.Add(-1)
					total.Add(1)
					if err := f.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d holders at once", m)
	}
	if n := total.Load(); n != clients*workers*rounds {
		t.Fatalf("%d holds, want %d", n, clients*workers*rounds)
	}
	if l := fairLine(t, admin, name); len(l) != 0 {
		t.Fatalf("line at the end: %v", l)
	}
}

// On a cluster (sharded notices, least-privilege user), waiters get the lock
// in line order, each woken by its own notice (10s backoff, 30s leases).
func TestFairMutexCluster(t *testing.T) {
	cl := testserver.StartCluster(t)
	admin := cl.Admin()
	ctx, cancel := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	var cs []*dlock.Client
	for range 3 {
		cs = append(cs, newClient(t, cl.Client(), opts...))
	}
	const name, n = "fair:cluster", 4
	holder := cs[0].NewFairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, n)
	for i := range n {
		f := cs[i%3].NewFairMutex(name, dlock.WithFairWaitTimeout(time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Lock(ctx); err != nil {
				if ctx.Err() == nil {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			order <- i
			if err := f.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		}()
		awaitLine(t, admin, name, i+1)
	}
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for k := range n {
		select {
		case who := <-order:
			if who != k {
				t.Fatalf("grant %d went to waiter %d", k, who)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d did not get the lock within 5s", k)
		}
	}
	if d := time.Since(released); d > 2*time.Second {
		t.Fatalf("%d hand-offs took %v: not woken by their notices", n, d)
	}
	wg.Wait() // the last Unlock
	if l := fairLine(t, admin, name); len(l) != 0 {
		t.Fatalf("line after everyone's turn: %v", l)
	}
}
