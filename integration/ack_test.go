package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// primaryWithReplica starts a primary and one replica synced to it.
func primaryWithReplica(t *testing.T) (primary, replica *testserver.Redis) {
	t.Helper()
	primary = testserver.StartRedis(t)
	primary.RequireLocal()
	replica = testserver.StartRedis(t, "--replicaof", "127.0.0.1", strings.Split(primary.Addr, ":")[1])
	testserver.WaitFor(t, 10*time.Second, "the replica to sync", func() bool {
		info := primary.Admin().Info(context.Background(), "replication").Val()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	// "online" on the primary comes before the replica has loaded what it was
	// sent and acknowledges writes (up to a second later here).
	testserver.WaitFor(t, 10*time.Second, "the replica to acknowledge a write", func() bool {
		ctx := context.Background()
		primary.Admin().Set(ctx, "ack:probe", "1", time.Second)
		return primary.Admin().Wait(ctx, 1, 100*time.Millisecond).Val() == 1
	})
	return primary, replica
}

// With the replica frozen, an acquire that asks for one acknowledgement is
// rolled back and reported with the counts; with it back, locking works.
func TestReplicaAckShortRollsBack(t *testing.T) {
	primary, replica := primaryWithReplica(t)
	// WAIT is not in the lock user's rule (the README adds +wait for
	// WithReplicaAck): these tests lock as the default user.
	c := newClient(t, primary.Admin(), dlock.WithReplicaAck(1, 200*time.Millisecond))
	ctx := ctxT(t)
	m := c.NewMutex("ack:short")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock with a live replica: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	replica.Pause()
	err := m.Lock(ctx)
	if !errors.Is(err, dlock.ErrNotReplicated) || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Fatalf("Lock with the replica frozen = %v, want ErrNotReplicated naming 0 of 1", err)
	}
	if primary.Admin().Exists(ctx, "ack:short").Val() != 0 {
		t.Fatal("the unreplicated grant was not rolled back")
	}
	if m.IsHeld() {
		t.Fatal("handle holds after a rolled-back acquire")
	}
	replica.Resume()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock after the replica came back: %v", err)
	}
	_ = m.Unlock(ctx)
}

// A renewal without the acknowledgement counts as unconfirmed: with the
// replica frozen longer than the lease, the hold is lost at its deadline.
func TestReplicaAckRenewalUnconfirmedLoses(t *testing.T) {
	primary, replica := primaryWithReplica(t)
	c := newClient(t, primary.Admin(), dlock.WithReplicaAck(1, 100*time.Millisecond))
	ctx := ctxT(t)
	m := c.NewMutex("ack:renew")
	// The grant itself needs the acknowledgement within 100ms, which a loaded
	// machine may miss: that case is TestReplicaAckShortRollsBack's, so retry.
	var err error
	testserver.WaitFor(t, 10*time.Second, "a grant acknowledged within 100ms", func() bool {
		err = m.Lock(ctx)
		if err != nil && !errors.Is(err, dlock.ErrNotReplicated) {
			t.Fatal(err)
		}
		return err == nil
	})
	replica.Pause()
	defer replica.Resume()
	frozen := time.Now()
	if !closedWithin(m.Done(), lease+time.Second) {
		t.Fatal("hold not lost while no renewal was acknowledged")
	}
	if d := time.Since(frozen); d > lease+300*time.Millisecond {
		t.Fatalf("loss after %v, past the lease", d)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err = %v", m.Err())
	}
}

// Sentinel with two replicas, WithReplicaAck(1): a lock acquired, then the
// primary killed and a replica promoted: the lock is on the new primary and
// renewals go on through the failover client.
func TestReplicaAckHoldSurvivesFailover(t *testing.T) {
	g := testserver.StartSentinelGroupN(t, 2)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{ // as the default user: see TestReplicaAckShortRollsBack
		MasterName: g.Master, SentinelAddrs: g.Sentinels,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 2 * time.Second, MaxRetries: -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, dlock.WithWatchdogTimeout(15*time.Second), dlock.WithRenewInterval(time.Second),
		dlock.WithReplicaAck(1, time.Second))
	ctx := ctxT(t)
	m := c.NewMutex("ack:failover")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	token := g.Primary.Admin().Get(ctx, "ack:failover").Val()
	g.Primary.Kill()
	var promoted *testserver.Redis
	testserver.WaitFor(t, 30*time.Second, "a replica to be promoted", func() bool {
		for _, r := range g.Replicas {
			if role, err := r.Admin().Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
				promoted = r
				return true
			}
		}
		return false
	})
	if v := promoted.Admin().Get(ctx, "ack:failover").Val(); v != token {
		t.Fatalf("the new primary holds %q, not the acknowledged lock", v)
	}
	s0 := c.Stats()
	testserver.WaitFor(t, 20*time.Second, "an acknowledged renewal on the new primary", func() bool {
		return c.Stats().Renewals > s0.Renewals
	})
	if !m.IsHeld() {
		t.Fatalf("hold lost across the failover: %v", m.Err())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on the new primary: %v", err)
	}
}
