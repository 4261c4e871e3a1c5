package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// 10,000 locks held by one Client keep their TTLs fresh across several renew
// intervals with short leases: one watchdog, batched renewals.
func TestWatchdogKeeps10000LocksFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the 10,000-lock test")
	}
	const (
		n       = 10000
		lease10 = time.Second
		renew10 = 250 * time.Millisecond
	)
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	c := newClient(t, srv.Client(func(o *redis.Options) { o.PoolSize = 64 }),
		dlock.WithWatchdogTimeout(lease10), dlock.WithRenewInterval(renew10))
	ctx := ctxT(t)
	ms := make([]*dlock.Mutex, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				ms[i] = c.NewMutex(fmt.Sprintf("lock:scale:%d", i))
				if err := ms[i].Lock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if held := c.Stats().Held; held != n {
		t.Fatalf("Stats().Held = %d, want %d", held, n)
	}
	before := commandsProcessed(t, admin)
	stats0 := c.Stats()
	start := time.Now()
	for time.Since(start) < 4*lease10 {
		minTTL := ttlFloor(t, admin, ms)
		if minTTL < lease10-2*renew10-100*time.Millisecond {
			t.Fatalf("after %v the lowest TTL of %d locks is %v: renewals fall behind", time.Since(start), n, minTTL)
		}
		for _, m := range ms {
			if !m.IsHeld() {
				t.Fatalf("%s lost: %v", m.Name(), m.Err())
			}
		}
		time.Sleep(renew10 / 2) // sampling over time
	}
	elapsed := time.Since(start)
	cmds := commandsProcessed(t, admin) - before
	s := c.Stats()
	pipelines, renewals := s.Pipelines-stats0.Pipelines, s.Renewals-stats0.Renewals
	t.Logf("%d locks over %v: %d renewals in %d pipelines (%d passes); largest pass %d entries in %v; %d commands processed by Redis (incl. the test's PTTL reads)",
		n, elapsed.Round(time.Millisecond), renewals, pipelines, s.Passes-stats0.Passes, s.MaxPassSize, s.MaxPass, cmds)
	// Each lock is renewed once per interval plus the pass's own latency:
	// at least half the intervals' worth, whatever the load (TTLs were
	// checked above; this checks that every lock, not a few, was renewed).
	intervals := uint64(elapsed/renew10) + 1
	if renewals < uint64(n)*intervals/2 {
		t.Fatalf("%d renewals over %d intervals, want about %d per interval", renewals, intervals, n)
	}
	// Renewals are batched: a bounded number of round trips per interval,
	// whatever the number of locks (slack groups due renewals into ~10 passes).
	if perInterval := pipelines / intervals; perInterval > 20 {
		t.Fatalf("%d pipelines per renew interval for %d locks: renewals are not batched", perInterval, n)
	}
	for _, m := range ms {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// ttlFloor returns the lowest PTTL among the locks' keys, read in one pipeline.
func ttlFloor(t *testing.T, rdb *redis.Client, ms []*dlock.Mutex) time.Duration {
	t.Helper()
	cmds := make([]*redis.DurationCmd, len(ms))
	_, err := rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		for i, m := range ms {
			cmds[i] = p.PTTL(context.Background(), m.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	floor := time.Hour
	for i, c := range cmds {
		if c.Val() <= 0 {
			t.Fatalf("%s has PTTL %v", ms[i].Name(), c.Val())
		}
		floor = min(floor, c.Val())
	}
	return floor
}

func commandsProcessed(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	var n int64
	info := rdb.Info(context.Background(), "stats").Val()
	i := strings.Index(info, "total_commands_processed:")
	if _, err := fmt.Sscanf(info[max(i, 0):], "total_commands_processed:%d", &n); i < 0 || err != nil {
		t.Fatal(err)
	}
	return n
}
