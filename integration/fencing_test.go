package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestFencingTokensIncreaseAcrossHoldersAndFlushAll(t *testing.T) {
	srv, rdb, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	var last int64
	names := []string{"lock:f1", "lock:f2", "{tag}lock:f3", "lock:f1"}
	for i := range 12 {
		c := a
		if i%2 == 1 {
			c = b
		}
		name := names[i%len(names)]
		err := c.WithLock(ctx, name, func(_ context.Context, token int64) error {
			if name == "lock:f1" && token <= last {
				return fmt.Errorf("token %d not above the previous %d", token, last)
			}
			if name == "lock:f1" {
				last = token
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	before := last
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	m := b.NewMutex("lock:f1")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m.FencingToken() <= before {
		t.Fatalf("after FLUSHALL the token %d is not above %d", m.FencingToken(), before)
	}
	// Counters are bounded: one per hash slot, named dlock:fence:{T}.
	keys := rdb.Keys(ctx, "dlock:fence:*").Val()
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "dlock:fence:{") {
		t.Fatalf("fencing counters after FLUSHALL and one lock: %v", keys)
	}
	_ = m.Unlock(ctx)
}

// A missing counter restarts from the server's TIME in microseconds.
func TestFencingCounterStartsFromServerTime(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	now := rdb.Time(ctx).Val()
	m := c.NewMutex("lock:time")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctx)
	tok := m.FencingToken()
	if micros := now.UnixMicro(); tok <= micros || tok > micros+int64(time.Minute/time.Microsecond) {
		t.Fatalf("first token %d, want just above the server time %d µs", tok, micros)
	}
}

// The fencing check in storage: a holder that stalls past its lease has its
// late write rejected, and the new holder's write is kept.
func TestFencingRejectsLateWriteInPostgres(t *testing.T) {
	pg := testserver.Postgres(t)
	srv, _, a := setup(t)
	b := newClient(t, srv.Client())
	ctx := ctxT(t)
	table := fmt.Sprintf("dlock_shipment_%d", time.Now().UnixNano())
	if _, err := pg.Exec(ctx, `CREATE TABLE `+table+` (
		order_id text PRIMARY KEY, status text NOT NULL, lock_token bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), `DROP TABLE `+table) })
	if _, err := pg.Exec(ctx, `INSERT INTO `+table+` VALUES ('1001', 'new', 0)`); err != nil {
		t.Fatal(err)
	}
	write := func(status string, token int64) int64 {
		tag, err := pg.Exec(ctx, `UPDATE `+table+` SET status = $1, lock_token = $2
			WHERE order_id = '1001' AND lock_token < $2`, status, token)
		if err != nil {
			t.Fatal(err)
		}
		return tag.RowsAffected()
	}

	// Worker 1 takes the lock with a fixed lease and stalls past it.
	slow := a.NewMutex("lock:order:1001", dlock.WithLeaseTime(200*time.Millisecond))
	if err := slow.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	staleToken := slow.FencingToken()
	// Worker 2 waits, gets the lock when the lease ends, and ships.
	err := b.WithLock(ctx, "lock:order:1001", func(_ context.Context, token int64) error {
		if token <= staleToken {
			return fmt.Errorf("new token %d not above %d", token, staleToken)
		}
		if n := write("shipped-by-2", token); n != 1 {
			return fmt.Errorf("new holder's write affected %d rows", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Worker 1 wakes up and writes with its old token: rejected.
	if !errors.Is(slow.Err(), dlock.ErrLockLost) {
		t.Fatalf("stalled holder's Err = %v, want ErrLockLost", slow.Err())
	}
	if n := write("shipped-by-1", staleToken); n != 0 {
		t.Fatalf("late write with stale token %d was accepted", staleToken)
	}
	var status string
	var tok int64
	if err := pg.QueryRow(ctx, `SELECT status, lock_token FROM `+table+` WHERE order_id = '1001'`).Scan(&status, &tok); err != nil {
		t.Fatal(err)
	}
	if status != "shipped-by-2" || tok <= staleToken {
		t.Fatalf("row = %q, %d; want the new holder's write", status, tok)
	}
}

// A counter that went back (a failover to a replica that missed increments,
// a restored backup) still yields tokens above every earlier one: never below
// the server clock in microseconds.
func TestFencingCounterThatWentBackStillIncreases(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:stale")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.FencingToken()
	_ = m.Unlock(ctx)
	keys := rdb.Keys(ctx, "dlock:fence:*").Val()
	if len(keys) != 1 {
		t.Fatalf("counters: %v", keys)
	}
	rdb.Set(ctx, keys[0], 5, 0) // the counter went back
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m.FencingToken() <= first {
		t.Fatalf("token %d after the counter went back, not above %d", m.FencingToken(), first)
	}
	_ = m.Unlock(ctx)
}
