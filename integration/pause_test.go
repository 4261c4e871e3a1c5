package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

const pauseLease = 500 * time.Millisecond

// A holder in another process is stopped with SIGSTOP for longer than its
// lease; another process takes the lock and writes; the first gets SIGCONT.
// It must report the loss (its WithLock context is cancelled with
// ErrLockLost, and WithLock returns ErrLockLost) before it could act on a
// renewal, and its late write with its old token must be rejected by the
// fenced PostgreSQL table, while the new holder's write is kept.
func TestPausedHolderIsFencedOff(t *testing.T) {
	pg := testserver.Postgres(t)
	srv := testserver.StartRedis(t)
	table := fmt.Sprintf("dlock_pause_%d", time.Now().UnixNano())
	ctx := context.Background()
	if _, err := pg.Exec(ctx, `CREATE TABLE `+table+` (id int PRIMARY KEY, writer text, lock_token bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), `DROP TABLE `+table) })
	if _, err := pg.Exec(ctx, `INSERT INTO `+table+` VALUES (1, 'nobody', 0)`); err != nil {
		t.Fatal(err)
	}

	c := startChild(t, "pause", "DLOCK_REDIS="+srv.Addr, "DLOCK_TABLE="+table, "DLOCK_PG="+postgresURL())
	line := c.expect(t, "acquired ", 10*time.Second)
	oldToken, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)

	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Another process (this one) takes the lock once the frozen lease runs
	// out, and writes with its new token.
	other := newClient(t, srv.Client(), dlock.WithWatchdogTimeout(pauseLease), dlock.WithRenewInterval(pauseLease/3))
	err := other.WithLock(ctx, "pause:order", func(_ context.Context, token int64) error {
		if token <= oldToken {
			return fmt.Errorf("new token %d not above the paused holder's %d", token, oldToken)
		}
		tag, err := pg.Exec(ctx, `UPDATE `+table+` SET writer = 'new', lock_token = $1 WHERE id = 1 AND lock_token < $1`, token)
		if err != nil || tag.RowsAffected() != 1 {
			return fmt.Errorf("new holder's write: %v rows, %v", tag.RowsAffected(), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(stopped); d < pauseLease/2 {
		t.Fatalf("the lock was taken %v after the pause, before the paused lease could have run out", d)
	}
	time.Sleep(pauseLease) // the pause lasts a while longer
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()

	// The child reports the loss first, then tries its write anyway (as a
	// holder that does not check would) and sees it rejected.
	lost := c.expect(t, "lost ", 5*time.Second)
	t.Logf("child after SIGCONT: %s (%v)", lost, time.Since(resumed))
	if !strings.Contains(lost, "held=false") || !strings.Contains(lost, "cause=lost") || !strings.Contains(lost, "mutex=true") {
		t.Fatalf("child did not report the loss before acting: %q", lost)
	}
	if w := c.expect(t, "write ", 5*time.Second); w != "write rows=0" {
		t.Fatalf("the paused holder's late write: %q, want rejected (rows=0)", w)
	}
	if r := c.expect(t, "withlock ", 5*time.Second); r != "withlock err=lost" {
		t.Fatalf("WithLock in the child: %q, want an error matching ErrLockLost", r)
	}
	if code := c.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("child exited %d", code)
	}
	var writer string
	var tok int64
	if err := pg.QueryRow(ctx, `SELECT writer, lock_token FROM `+table+` WHERE id = 1`).Scan(&writer, &tok); err != nil {
		t.Fatal(err)
	}
	if writer != "new" || tok <= oldToken {
		t.Fatalf("row = %q, %d; want the new holder's write kept", writer, tok)
	}
}

// postgresURL is the test database, as testserver.Postgres connects to it.
func postgresURL() string {
	if u := os.Getenv("DLOCK_POSTGRES_URL"); u != "" {
		return u
	}
	return testserver.DefaultPostgresURL
}

// pauseChild holds pause:order through WithLock and pause:other through a
// Mutex, prints its token, and waits in its critical section, where SIGSTOP
// freezes it. When the WithLock context ends it prints what it knows (its
// Mutex's IsHeld and Done, the context's cause), then writes with its token as
// a careless holder would, prints how many rows the fenced UPDATE changed, and
// what WithLock returned.
func pauseChild() error {
	ctx, cancel := childCtx()
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: childEnv("DLOCK_REDIS")})
	defer rdb.Close()
	pg, err := pgx.Connect(ctx, childEnv("DLOCK_PG"))
	if err != nil {
		return err
	}
	defer pg.Close(context.Background())
	table := childEnv("DLOCK_TABLE")
	c, err := dlock.New(rdb, dlock.WithWatchdogTimeout(pauseLease), dlock.WithRenewInterval(pauseLease/3))
	if err != nil {
		return err
	}
	defer c.Close()
	other := c.NewMutex("pause:other")
	if err := other.Lock(ctx); err != nil {
		return err
	}
	err = c.WithLock(ctx, "pause:order", func(fctx context.Context, token int64) error {
		fmt.Printf("acquired %d\n", token)
		<-fctx.Done() // the critical section; SIGSTOP freezes it here
		cause := "other"
		if errors.Is(context.Cause(fctx), dlock.ErrLockLost) {
			cause = "lost"
		}
		<-other.Done() // the Mutex's hold ended too (its deadline passed as well)
		fmt.Printf("lost held=%v done=true cause=%s mutex=%v\n", other.IsHeld(), cause, errors.Is(other.Err(), dlock.ErrLockLost))
		tag, err := pg.Exec(ctx, `UPDATE `+table+` SET writer = 'paused', lock_token = $1 WHERE id = 1 AND lock_token < $1`, token)
		if err != nil {
			return err
		}
		fmt.Printf("write rows=%d\n", tag.RowsAffected())
		return nil
	})
	if errors.Is(err, dlock.ErrLockLost) {
		fmt.Println("withlock err=lost")
	} else {
		fmt.Printf("withlock err=%v\n", err)
	}
	_ = other.Unlock(ctx)
	return nil
}
