package integration

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Short leases keep the suite quick: 300ms leases renewed every 100ms.
const (
	lease = 300 * time.Millisecond
	renew = 100 * time.Millisecond
)

// newClient returns a dlock Client on rdb with short leases, closed when the
// test ends.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	opts = append([]dlock.Option{dlock.WithWatchdogTimeout(lease), dlock.WithRenewInterval(renew)}, opts...)
	c, err := dlock.New(rdb, opts...)
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setup starts a redis-server and returns it, an admin client for what the
// test does to Redis itself (full rights), and a dlock Client that connects
// as the harness's least-privilege lock user (srv.Client()).
func setup(t testing.TB, opts ...dlock.Option) (*testserver.Redis, *redis.Client, *dlock.Client) {
	t.Helper()
	srv := testserver.StartRedis(t)
	return srv, srv.Admin(), newClient(t, srv.Client(), opts...)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// closedWithin reports whether ch closes within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
