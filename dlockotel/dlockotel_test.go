package dlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"github.com/dlock-go/dlock/internal/testserver"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// metrics collects the reader's data into name -> attribute set -> value
// (sums) or count (histograms).
func metrics(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != dlockotel.ScopeName {
			t.Fatalf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			vals := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					vals[key(p.Attributes)] += float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					vals[key(p.Attributes)] += float64(p.Count)
				}
			}
			out[m.Name] = vals
		}
	}
	return out
}

func key(s attribute.Set) string {
	k := ""
	for _, kv := range s.ToSlice() {
		k += string(kv.Key) + "=" + kv.Value.Emit() + ";"
	}
	return k
}

func TestMetricsAndSpansAfterScriptedSequence(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	obs, err := dlockotel.New(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}

	srv := testserver.StartRedis(t)
	rdb := srv.Client()
	c, err := dlock.New(rdb, dlock.WithObserver(obs),
		dlock.WithWatchdogTimeout(300*time.Millisecond), dlock.WithRenewInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// 1. a: acquired, held through renewals, then released.
	a := c.NewMutex("otel:a")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// 2. a second handle finds it busy.
	if ok, err := c.NewMutex("otel:a").TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	testserver.WaitFor(t, 5*time.Second, "two renewals", func() bool { return c.Stats().Renewals >= 2 })
	if m := metrics(t, reader); m["dlock.locks.held"][""] != 1 {
		t.Fatalf("held while a is locked = %v, want 1", m["dlock.locks.held"])
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// 3. b: acquired, then its key is stolen: lost.
	b := c.NewMutex("otel:b")
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, "otel:b", "00000000-0000-4000-8000-000000000000", time.Minute)
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("loss not reported")
	}
	if err := b.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock = %v", err)
	}

	m := metrics(t, reader)
	want := map[string]map[string]float64{
		"dlock.lock.acquisitions": {"dlock.outcome=acquired;": 2, "dlock.outcome=busy;": 1},
		"dlock.lock.wait":         {"dlock.outcome=acquired;": 2, "dlock.outcome=busy;": 1},
		"dlock.lock.unlocks":      {"dlock.outcome=released;": 1, "dlock.outcome=lost;": 1},
		"dlock.lock.hold":         {"dlock.ending=unlocked;": 1, "dlock.ending=lost;": 1},
		"dlock.lock.losses":       {"": 1},
		"dlock.locks.held":        {"": 0},
	}
	for name, vals := range want {
		for k, v := range vals {
			if got := m[name][k]; got != v {
				t.Errorf("%s{%s} = %v, want %v (all: %v)", name, k, got, v, m[name])
			}
		}
	}
	if m["dlock.renewals"][""] < 2 {
		t.Errorf("dlock.renewals = %v, want at least 2", m["dlock.renewals"])
	}
	if m["dlock.renewal.pass"][""] < 1 {
		t.Errorf("dlock.renewal.pass = %v, want at least 1 pass", m["dlock.renewal.pass"])
	}

	var locks, unlocks int
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "dlock.Lock":
			locks++
		case "dlock.Unlock":
			unlocks++
		}
		found := false
		for _, kv := range s.Attributes() {
			found = found || kv.Key == dlockotel.NameKey
		}
		if !found {
			t.Errorf("span %s without the lock name", s.Name())
		}
	}
	if locks != 3 || unlocks != 2 {
		t.Fatalf("spans: %d dlock.Lock, %d dlock.Unlock; want 3, 2", locks, unlocks)
	}
}

func TestNameAttributeIsOptIn(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := dlockotel.New(dlockotel.WithMeterProvider(mp), dlockotel.WithNameAttribute())
	if err != nil {
		t.Fatal(err)
	}
	srv := testserver.StartRedis(t)
	c, err := dlock.New(srv.Client(), dlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WithLock(context.Background(), "otel:named", func(context.Context, int64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	m := metrics(t, reader)
	if got := m["dlock.lock.acquisitions"]["dlock.lock.name=otel:named;dlock.outcome=acquired;"]; got != 1 {
		t.Fatalf("acquisitions = %v", m["dlock.lock.acquisitions"])
	}
}
