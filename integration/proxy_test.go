package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// faultProxy is an in-process Toxiproxy between a client and a redis-server,
// on a loopback port, stopped when the test ends.
type faultProxy struct {
	t *testing.T
	p *toxiproxy.Proxy
}

func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	fp := &faultProxy{t: t, p: p}
	t.Cleanup(fp.stop)
	return fp
}

// addr is where clients connect.
func (fp *faultProxy) addr() string { return fp.p.Listen }

// toxic adds a toxic from its JSON description.
func (fp *faultProxy) toxic(spec string) {
	fp.t.Helper()
	if _, err := fp.p.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		fp.t.Fatal(err)
	}
}

// heal removes every toxic and restarts the proxy if it was stopped.
func (fp *faultProxy) heal() {
	fp.t.Helper()
	fp.p.Toxics.ResetToxics(context.Background())
	if err := fp.p.Start(); err != nil && err != toxiproxy.ErrProxyAlreadyStarted {
		fp.t.Fatal(err)
	}
}

func (fp *faultProxy) stop() { fp.p.Stop() }

// client returns a go-redis client through the proxy, with short timeouts and
// no go-redis retries, so a fault shows within a fraction of a lease; it
// authenticates as the harness's client user.
func (fp *faultProxy) client(srv *testserver.Redis) *redis.Client {
	return srv.Client(func(o *redis.Options) {
		o.Addr = fp.addr()
		o.DialTimeout = 200 * time.Millisecond
		o.ReadTimeout = 300 * time.Millisecond
		o.WriteTimeout = 300 * time.Millisecond
		o.PoolTimeout = 300 * time.Millisecond
		o.MaxRetries = -1
		o.ContextTimeoutEnabled = true
	})
}

// A fault is one way the network between client and server breaks.
type fault struct {
	name string
	// slow faults (latency) leave the connection working, only slower.
	slow   bool
	inject func(fp *faultProxy)
}

// faults are the network faults the suite injects. The latency (a 160ms
// round trip) is longer than the renew interval (150ms).
var faults = []fault{
	{name: "latency", slow: true, inject: func(fp *faultProxy) {
		fp.toxic(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":160}}`)
	}},
	{name: "reset", inject: func(fp *faultProxy) {
		fp.toxic(`{"name":"reset","type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`)
		fp.toxic(`{"name":"reset-up","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
	}},
	{name: "blackhole", inject: func(fp *faultProxy) {
		fp.toxic(`{"name":"hole","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
		fp.toxic(`{"name":"hole-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
	}},
	{name: "partition", inject: func(fp *faultProxy) { fp.p.Stop() }},
}
