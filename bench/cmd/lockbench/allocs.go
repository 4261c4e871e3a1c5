package main

import (
	"context"
	"testing"
)

// allocResult is testing.Benchmark's measure of one Lock+Unlock cycle.
type allocResult struct {
	allocs, bytes, ns int64
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
	return res
}
