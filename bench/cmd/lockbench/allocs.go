package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// allocResult is testing.Benchmark's measure of one Lock+Unlock cycle.
type allocResult struct {
	allocs, bytes, ns int64
	serverUS          float64 // Redis CPU per cycle, from INFO commandstats
	errs              errCount
	failure           string
}

// runAllocs benchmarks Lock+Unlock on one reused handle, one goroutine, with
// context.Background(). Allocations are counted process-wide, so they
// include the library's background goroutines serving the cycle.
func runAllocs(spec libSpec, addr string) *allocResult {
	res := &allocResult{}
	l, err := spec.open(addr, false)
	if err != nil {
		res.failure = err.Error()
		return res
	}
	defer l.close()
	ctx := context.Background()
	m := l.mutex("bench:allocs:" + spec.name)
	if err := cycle(ctx, m); err != nil {
		res.failure = "warm-up: " + err.Error()
		return res
	}
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := cycle(ctx, m); err != nil {
				res.errs.add(err)
			}
		}
	})
	res.allocs, res.bytes, res.ns = r.AllocsPerOp(), r.AllocedBytesPerOp(), r.NsPerOp()
	res.serverUS = serverCost(ctx, addr, m)
	return res
}

// serverCost returns the microseconds Redis spends executing one cycle's
// commands (scripts included), from INFO commandstats over 2,000 cycles.
// It resets the server's statistics; nothing else runs meanwhile.
func serverCost(ctx context.Context, addr string, m mutex) float64 {
	const cycles = 2000
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return 0
	}
	for range cycles {
		if err := cycle(ctx, m); err != nil {
			return 0
		}
	}
	text, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(text, "\n") {
		// cmdstat_evalsha:calls=4000,usec=19868,usec_per_call=4.97,...
		_, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info") ||
			strings.HasPrefix(line, "cmdstat_config") {
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				us, _ := strconv.ParseFloat(v, 64)
				total += us
			}
		}
	}
	return total / cycles
}
