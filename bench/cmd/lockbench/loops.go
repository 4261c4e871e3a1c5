package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// errCount counts errors and keeps the first few for the report.
type errCount struct {
	mu    sync.Mutex
	n     int64
	first []string
}

func (e *errCount) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(e.first) < 3 {
		e.first = append(e.first, err.Error())
	}
}

// merge adds o's errors to e.
func (e *errCount) merge(o *errCount) {
	o.mu.Lock()
	n, first := o.n, append([]string(nil), o.first...)
	o.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n += n
	for _, f := range first {
		if len(e.first) < 3 {
			e.first = append(e.first, f)
		}
	}
}

// hammer calls op from g goroutines, goroutine i passing i, until d has
// passed or ctx ends, and returns the successful calls per second of wall
// time. op is built once, so the loop adds no allocation per call.
func hammer(ctx context.Context, g int, d time.Duration, op func(i int) error, errs *errCount) float64 {
	var stop atomic.Bool
	t := time.AfterFunc(d, func() { stop.Store(true) })
	defer t.Stop()
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range g {
		wg.Go(func() {
			var n int64
			for !stop.Load() && ctx.Err() == nil {
				if err := op(i); err != nil {
					errs.add(err)
					continue
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// forEach calls f(i) for every i in [0, n) from g goroutines. It stops
// handing out indices when ctx ends or at deadline, and returns how many
// calls it made; errors go to errs.
func forEach(ctx context.Context, n, g int, deadline time.Time, f func(i int) error, errs *errCount) int {
	var next, made atomic.Int64
	var wg sync.WaitGroup
	for range min(g, n) {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				made.Add(1)
				if err := f(i); err != nil {
					errs.add(err)
				}
			}
		})
	}
	wg.Wait()
	return int(made.Load())
}
