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

// A primary with a replica and three sentinels: the primary is killed and
// the replica promoted while a lock is held, through a go-redis failover
// client. The lock had reached the replica before the kill (WAIT), and the
// lease (5s) outlasts the failover, so the hold goes on: renewals fail while
// there is no primary, then succeed on the new one, and the key on the new
// primary still holds the token. New locks work after the promotion and
// fencing tokens keep increasing. (Without WAIT, asynchronous replication can
// lose the key in a failover: the README says so.)
func TestSentinelFailoverKeepsReplicatedHold(t *testing.T) {
	g := testserver.StartSentinelGroup(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    g.Master,
		SentinelAddrs: g.Sentinels,
		DialTimeout:   300 * time.Millisecond,
		ReadTimeout:   300 * time.Millisecond,
		WriteTimeout:  300 * time.Millisecond,
		MaxRetries:    -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, dlock.WithWatchdogTimeout(8*time.Second), dlock.WithRenewInterval(time.Second))
	ctx := ctxT(t)

	m := c.NewMutex("sentinel:job")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.FencingToken()
	token := g.Primary.Admin().Get(ctx, "sentinel:job").Val()
	if n, err := g.Primary.Admin().Wait(ctx, 1, 2000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v: the lock did not reach the replica", n, err)
	}

	g.Primary.Kill()
	killed := time.Now()
	replica := g.Replica.Admin()
	testserver.WaitFor(t, 30*time.Second, "the replica to be promoted", func() bool {
		role, err := replica.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	t.Logf("replica promoted %v after the kill", time.Since(killed).Round(time.Millisecond))
	// Renewals reach the new primary and confirm the hold.
	s0 := c.Stats()
	testserver.WaitFor(t, 10*time.Second, "a renewal on the new primary", func() bool {
		return c.Stats().Renewals > s0.Renewals
	})
	if !m.IsHeld() || isClosed(m.Done()) {
		t.Fatalf("hold ended across the failover: %v", m.Err())
	}
	if v := replica.Get(ctx, "sentinel:job").Val(); v != token {
		t.Fatalf("the new primary holds %q, not our token", v)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on the new primary: %v", err)
	}
	// New locks work, with larger tokens.
	m2 := c.NewMutex("sentinel:next")
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m2.FencingToken() <= before {
		t.Fatalf("token after the failover %d not above %d", m2.FencingToken(), before)
	}
	_ = m2.Unlock(ctx)
}

// The same failover with a lease shorter than it: the hold is reported lost
// at its deadline (never held unconfirmed), and nothing is left on the new
// primary one lease after the promotion.
func TestSentinelFailoverLongerThanLeaseLoses(t *testing.T) {
	g := testserver.StartSentinelGroup(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: g.Master, SentinelAddrs: g.Sentinels,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, MaxRetries: -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	const short = 600 * time.Millisecond
	c := newClient(t, rdb, dlock.WithWatchdogTimeout(short), dlock.WithRenewInterval(short/4))
	ctx := ctxT(t)
	m := c.NewMutex("sentinel:short")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	g.Primary.Kill()
	killed := time.Now()
	if !closedWithin(m.Done(), short+time.Second) {
		t.Fatal("loss not signalled while there was no primary")
	}
	if d := time.Since(killed); d > short+500*time.Millisecond {
		t.Fatalf("loss signalled %v after the kill, after the lease", d)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err = %v", m.Err())
	}
	replica := g.Replica.Admin()
	testserver.WaitFor(t, 30*time.Second, "the replica to be promoted", func() bool {
		role, err := replica.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	testserver.WaitFor(t, short+time.Second, "no orphan one lease after the promotion", func() bool {
		return replica.Exists(context.Background(), "sentinel:short").Val() == 0
	})
	if ok, err := c.NewMutex("sentinel:short").TryLock(ctx, 5*time.Second); !ok || err != nil {
		t.Fatalf("lock after the failover: %v, %v", ok, err)
	}
}
