package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

var soakFor = flag.Duration("soak", time.Minute, "how long TestSoak runs its processes and injects faults")

// Shape of the soak.
const (
	soakProcs      = 3
	soakGoroutines = 4
	soakLease      = 600 * time.Millisecond
	soakRenew      = 150 * time.Millisecond
)

var soakNames = []string{"soak:a", "soak:b", "soak:c"}

// soakEntry is one critical section in the history.
type soakEntry struct {
	Proc, G    int
	Name       string
	Token      int64
	Start, End int64 // wall clock, ns
	Confirmed  bool  // IsHeld at the end: the lease was confirmed throughout
	Accepted   bool  // the fenced register took the write
	Lost       bool  // the loss was signalled (Done/Err or Unlock)
}

// The storm: several OS processes of several goroutines contend on a handful
// of names while network faults (latency, resets, black holes, partitions)
// and process pauses (SIGSTOP, sometimes longer than a lease) hit them at
// random. Every critical section writes to a fenced register in PostgreSQL.
// Checks: the register never accepts a stale token (accepted writes per name
// are strictly ordered by token); holders whose leases were both confirmed
// never overlap; every name is acquirable again within one lease after the
// last fault. Bounded by -soak (default 1m).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak runs for a minute")
	}
	pg := testserver.Postgres(t)
	srv := testserver.StartRedis(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("dlock_soak_%d", time.Now().UnixNano())
	for _, q := range []string{
		`CREATE TABLE ` + prefix + `_register (name text PRIMARY KEY, token bigint NOT NULL, writer text)`,
		`CREATE TABLE ` + prefix + `_accepted (id bigserial PRIMARY KEY, name text, token bigint, writer text)`,
	} {
		if _, err := pg.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = pg.Exec(context.Background(), `DROP TABLE `+prefix+`_register, `+prefix+`_accepted`)
	})
	for _, n := range soakNames {
		if _, err := pg.Exec(ctx, `INSERT INTO `+prefix+`_register VALUES ($1, 0, '')`, n); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	deadline := time.Now().Add(*soakFor)
	proxies := make([]*faultProxy, soakProcs)
	children := make([]*child, soakProcs)
	for i := range children {
		proxies[i] = newFaultProxy(t, srv.Addr)
		children[i] = startChild(t, "soak",
			"DLOCK_REDIS="+proxies[i].addr(), "DLOCK_PG="+postgresURL(), "DLOCK_TABLE="+prefix,
			"DLOCK_HISTORY="+filepath.Join(dir, fmt.Sprintf("history-%d", i)), "DLOCK_PROC="+strconv.Itoa(i),
			"DLOCK_DEADLINE="+strconv.FormatInt(deadline.UnixNano(), 10))
		children[i].expect(t, "ready", 10*time.Second)
	}

	injected := injectFaults(t, proxies, children, deadline.Add(-2*soakLease))
	for _, p := range proxies {
		p.heal()
	}
	lastFault := time.Now()
	for i, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		if code := c.wait(t, time.Until(deadline)+30*time.Second); code != 0 {
			t.Fatalf("soak child %d exited %d", i, code)
		}
	}

	// Every name is acquirable again within one lease after the last fault.
	check := newClient(t, srv.Client(), dlock.WithWatchdogTimeout(soakLease), dlock.WithRenewInterval(soakRenew))
	for _, n := range soakNames {
		m := check.NewMutex(n)
		if ok, err := m.TryLock(ctx, soakLease); !ok || err != nil {
			t.Fatalf("%s not acquirable %v after the last fault: %v, %v", n, time.Since(lastFault), ok, err)
		}
		_ = m.Unlock(ctx)
	}

	var history []soakEntry
	for i := range children {
		history = append(history, readHistory(t, filepath.Join(dir, fmt.Sprintf("history-%d", i)))...)
	}
	violations := checkOverlaps(t, history) + checkRegister(t, pg, prefix)
	var acquisitions, lost, rejected, unconfirmed int
	for _, e := range history {
		acquisitions++
		if e.Lost {
			lost++
		}
		if !e.Accepted {
			rejected++
		}
		if !e.Confirmed {
			unconfirmed++
		}
	}
	t.Logf("soak %v, %d processes × %d goroutines on %d names; faults injected: %v", *soakFor, soakProcs, soakGoroutines, len(soakNames), injected)
	t.Logf("acquisitions %d, losses signalled %d, holds not confirmed at their end %d, stale writes rejected %d, violations %d",
		acquisitions, lost, unconfirmed, rejected, violations)
	if acquisitions < 50 {
		t.Fatalf("only %d acquisitions: the soak did not exercise the lock", acquisitions)
	}
	if violations != 0 {
		t.Fatalf("%d violations", violations)
	}
}

// injectFaults hits random proxies and processes with random faults until
// until, and returns how many of each it injected.
func injectFaults(t *testing.T, proxies []*faultProxy, children []*child, until time.Time) map[string]int {
	counts := map[string]int{}
	for time.Now().Before(until) {
		i := rand.IntN(len(proxies))
		hold := time.Duration(100+rand.IntN(1400)) * time.Millisecond // sometimes longer than a lease
		kind := rand.IntN(len(faults) + 1)
		if kind == len(faults) {
			counts["pause"]++
			_ = children[i].cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(hold)
			_ = children[i].cmd.Process.Signal(syscall.SIGCONT)
		} else {
			counts[faults[kind].name]++
			faults[kind].inject(proxies[i])
			time.Sleep(hold)
			proxies[i].heal()
		}
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
	}
	return counts
}

func readHistory(t *testing.T, path string) []soakEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []soakEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e soakEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// checkOverlaps counts pairs of holds of one name, both confirmed, whose
// intervals overlap.
func checkOverlaps(t *testing.T, history []soakEntry) int {
	byName := map[string][]soakEntry{}
	for _, e := range history {
		if e.Confirmed {
			byName[e.Name] = append(byName[e.Name], e)
		}
	}
	n := 0
	for name, es := range byName {
		slices.SortFunc(es, func(a, b soakEntry) int { return int(a.Start - b.Start) })
		for i := 1; i < len(es); i++ {
			if es[i].Start < es[i-1].End {
				n++
				t.Errorf("%s: confirmed holds overlap: %+v and %+v", name, es[i-1], es[i])
			}
		}
	}
	return n
}

// checkRegister counts accepted writes whose token is not above the token
// accepted before them for the same name.
func checkRegister(t *testing.T, pg *pgx.Conn, prefix string) int {
	rows, err := pg.Query(context.Background(), `SELECT name, token FROM `+prefix+`_accepted ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[string]int64{}
	n := 0
	for rows.Next() {
		var name string
		var token int64
		if err := rows.Scan(&name, &token); err != nil {
			t.Fatal(err)
		}
		if token <= last[name] {
			n++
			t.Errorf("%s: the register accepted token %d after %d", name, token, last[name])
		}
		last[name] = token
	}
	return n
}

// soakChild runs soakGoroutines workers until the deadline, each locking a
// random name, writing to the fenced register, and recording its critical
// section; then it writes the history and exits.
func soakChild() error {
	ns, _ := strconv.ParseInt(childEnv("DLOCK_DEADLINE"), 10, 64)
	deadline := time.Unix(0, ns)
	proc, _ := strconv.Atoi(childEnv("DLOCK_PROC"))
	prefix := childEnv("DLOCK_TABLE")
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(20*time.Second))
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: childEnv("DLOCK_REDIS"),
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
		PoolTimeout: 300 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := dlock.New(rdb, dlock.WithWatchdogTimeout(soakLease), dlock.WithRenewInterval(soakRenew),
		dlock.WithCloseTimeout(time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("ready")

	var (
		mu      sync.Mutex
		history []soakEntry
		wg      sync.WaitGroup
		errs    = make(chan error, soakGoroutines)
	)
	for g := range soakGoroutines {
		wg.Go(func() {
			pg, err := pgx.Connect(ctx, childEnv("DLOCK_PG"))
			if err != nil {
				errs <- err
				return
			}
			defer pg.Close(context.Background())
			for time.Now().Before(deadline) {
				e, ok, err := soakSection(ctx, c, pg, prefix, proc, g)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					mu.Lock()
					history = append(history, e)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collectErrs(errs)...); err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range history {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	return os.WriteFile(childEnv("DLOCK_HISTORY"), []byte(b.String()), 0o644)
}

func collectErrs(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// soakSection is one attempt: lock a random name (waiting up to a few
// leases), write to the fenced register, hold a little, record, unlock. It
// reports ok false when the lock was not acquired; a database error is fatal.
func soakSection(ctx context.Context, c *dlock.Client, pg *pgx.Conn, prefix string, proc, g int) (soakEntry, bool, error) {
	name := soakNames[rand.IntN(len(soakNames))]
	m := c.NewMutex(name)
	ok, err := m.TryLock(context.Background(), 3*soakLease)
	if !ok || err != nil {
		return soakEntry{}, false, nil // busy, or Redis unreachable through a fault
	}
	e := soakEntry{Proc: proc, G: g, Name: name, Token: m.FencingToken(), Start: time.Now().UnixNano()}
	// Work before the write, where a pause or a fault can make the lease run
	// out, so that late writes with stale tokens happen and are rejected.
	time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	e.Accepted, err = fencedWrite(ctx, pg, prefix, name, e.Token, fmt.Sprintf("%d/%d", proc, g))
	if err != nil {
		_ = m.Unlock(context.Background())
		return e, false, err
	}
	time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond) // the rest of the work
	e.End = time.Now().UnixNano()
	e.Confirmed = m.IsHeld()
	uerr := m.Unlock(context.Background())
	e.Lost = errors.Is(uerr, dlock.ErrLockLost)
	return e, true, nil
}

// fencedWrite is the storage's check: the write lands only if token is above
// every token accepted before for the name, and each accepted write is
// appended to a log in the same transaction.
func fencedWrite(ctx context.Context, pg *pgx.Conn, prefix, name string, token int64, writer string) (bool, error) {
	tx, err := pg.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.Background())
	tag, err := tx.Exec(ctx, `UPDATE `+prefix+`_register SET token = $1, writer = $2 WHERE name = $3 AND token < $1`, token, writer, name)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 1 {
		if _, err := tx.Exec(ctx, `INSERT INTO `+prefix+`_accepted (name, token, writer) VALUES ($1, $2, $3)`, name, token, writer); err != nil {
			return false, err
		}
	}
	return tag.RowsAffected() == 1, tx.Commit(ctx)
}
