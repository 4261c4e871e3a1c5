package testserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRedisLifecycle(t *testing.T) {
	r := StartRedis(t)
	r.RequireLocal()
	rdb := r.Admin()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ConfigGet(ctx, "save").Val()["save"]; got != "" {
		t.Fatalf("save = %q, want persistence off", got)
	}

	r.Pause()
	short := r.Client(func(o *redis.Options) { o.ReadTimeout = 100 * time.Millisecond; o.MaxRetries = -1 })
	if err := short.Ping(ctx).Err(); err == nil {
		t.Fatal("a paused server answered")
	}
	r.Resume()
	WaitFor(t, 5*time.Second, "the resumed server to answer", func() bool { return rdb.Ping(ctx).Err() == nil })

	r.Restart()
	WaitFor(t, 5*time.Second, "the restarted server to answer", func() bool { return rdb.Ping(ctx).Err() == nil })
	if n := rdb.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("a restarted server kept its keys")
	}
	// The restarted server has the lock user again.
	if err := r.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("PING as %s after restart: %v", LockUser, err)
	}
	r.Kill()
	if ping(r.Addr, nil) == nil {
		t.Fatal("a killed server answered")
	}
}

func TestStartRedisWithArgs(t *testing.T) {
	r := StartRedis(t, "--maxmemory", "12mb")
	if got := r.Admin().ConfigGet(context.Background(), "maxmemory").Val()["maxmemory"]; got != "12582912" {
		t.Fatalf("maxmemory = %q", got)
	}
}

// Client connects as the lock user, with its rule and nothing more; Admin as
// the default user.
func TestClientIsLockUserAdminIsDefault(t *testing.T) {
	r := StartRedis(t)
	r.ExpectDenials()
	ctx := context.Background()
	c, admin := r.Client(), r.Admin()
	if who, err := admin.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "default" {
		t.Fatalf("Admin: ACL WHOAMI = %q, %v; want default", who, err)
	}
	// The lock user may not even ask who it is; the server's ACL log names it.
	if err := c.Do(ctx, "ACL", "WHOAMI").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("ACL WHOAMI as %s = %v, want NOPERM", LockUser, err)
	}
	if err := c.FlushAll(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("FLUSHALL as %s = %v, want NOPERM", LockUser, err)
	}
	log, err := admin.Do(ctx, "ACL", "LOG", "1").Slice()
	if err != nil || len(log) != 1 || !strings.Contains(fmt.Sprint(log[0]), "username:"+LockUser) ||
		!strings.Contains(fmt.Sprint(log[0]), "object:flushall") {
		t.Fatalf("ACL LOG = %v, %v; want the refused FLUSHALL by %s", log, err, LockUser)
	}
	if name, pass := r.LockUser(); name != LockUser || len(pass) < 32 {
		t.Fatalf("LockUser() = %q, %q", name, pass)
	}
}

// A refusal of the lock user fails the test when the server stops, unless
// the test expects it.
func TestDenialsFailTheTest(t *testing.T) {
	r := StartRedis(t)
	if err := r.Client().Keys(context.Background(), "*").Err(); err == nil {
		t.Fatal("KEYS as the lock user was not refused")
	}
	rec := &recordTB{TB: t}
	r.tb = rec
	r.checkDenials()
	r.tb = t
	r.ExpectDenials() // for the real check at the end of this test
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "command keys") || !strings.Contains(rec.errs[0], "Admin") {
		t.Fatalf("errors reported: %q; want one naming the refused KEYS", rec.errs)
	}
}

type recordTB struct {
	testing.TB
	errs []string
}

func (r *recordTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A server whose default user needs a password (--requirepass): Admin uses it.
func TestRequirePass(t *testing.T) {
	r := StartRedis(t, "--requirepass", "s3cret")
	ctx := context.Background()
	if err := r.Admin().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("PING as %s: %v", LockUser, err)
	}
}

// A TLS server: Client and Admin connect over TLS, the lock user exists, and
// a Restart keeps the certificates.
func TestRedisTLS(t *testing.T) {
	r, cfg := StartRedisTLS(t)
	ctx := context.Background()
	if cfg == nil || cfg.RootCAs == nil {
		t.Fatal("no client TLS configuration")
	}
	if err := r.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("PING as %s over TLS: %v", LockUser, err)
	}
	if ping(r.Addr, nil) == nil {
		t.Fatal("the TLS port answered a plain PING")
	}
	r.Restart()
	if err := r.Admin().Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS after restart: %v", err)
	}
}

func TestPostgres(t *testing.T) {
	pg := Postgres(t)
	var one int
	if err := pg.QueryRow(context.Background(), "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1 = %d, %v", one, err)
	}
}
