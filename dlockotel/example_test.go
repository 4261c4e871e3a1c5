package dlockotel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlockotel"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Instrument a Client: pass the Observer to dlock.WithObserver. Here the
// metrics go to an in-memory reader; in a service, use your MeterProvider
// and TracerProvider (or the global ones, the default).
func ExampleNew() {
	mr, err := miniredis.Run() // stands in for your Redis
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	obs, err := dlockotel.New(dlockotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	client, err := dlock.New(rdb, dlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	_ = client.WithLock(context.Background(), "lock:report", func(context.Context, int64) error { return nil })

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "dlock.lock.acquisitions" {
			fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output: dlock.lock.acquisitions 1
}
