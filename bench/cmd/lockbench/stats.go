package main

import (
	"slices"
	"time"
)

// dist summarises a set of latencies.
type dist struct {
	n             int
	p50, p99, max time.Duration
}

// summarize returns the nearest-rank p50 and p99 and the maximum of ds; it
// sorts ds.
func summarize(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	slices.Sort(ds)
	return dist{n: len(ds), p50: rank(ds, 0.50), p99: rank(ds, 0.99), max: ds[len(ds)-1]}
}

// median returns the median of xs (0 when empty); it sorts xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// rank is the nearest-rank percentile q (0..1] of sorted ds.
func rank(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
