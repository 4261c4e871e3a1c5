package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRedisLifecycle(t *testing.T) {
	r := StartRedis(t)
	r.RequireLocal()
	rdb := r.Client()
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
	r.Kill()
	if ping(r.Addr) == nil {
		t.Fatal("a killed server answered")
	}
}

func TestStartRedisWithArgs(t *testing.T) {
	r := StartRedis(t, "--maxmemory", "12mb")
	if got := r.Client().ConfigGet(context.Background(), "maxmemory").Val()["maxmemory"]; got != "12582912" {
		t.Fatalf("maxmemory = %q", got)
	}
}

func TestPostgres(t *testing.T) {
	pg := Postgres(t)
	var one int
	if err := pg.QueryRow(context.Background(), "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1 = %d, %v", one, err)
	}
}
