package main

import (
	"context"
	"fmt"
	"time"
)

// uncontendedResult is Lock+Unlock throughput with g goroutines on g names,
// beside the same pool's PING throughput halved (a cycle is two round trips).
type uncontendedResult struct {
	goroutines int
	cycles     float64 // Lock+Unlock cycles per second (median of rounds)
	ceiling    float64 // PINGs per second / 2 (median of rounds)
	ratioMed   float64 // median over rounds of cycles / ceiling; 0: one round
	ratioLo    float64 // lowest and highest round ratio
	ratioHi    float64
	rounds     int
	errs       errCount
	failure    string
}

func (r *uncontendedResult) ratio() float64 {
	if r.ratioMed > 0 {
		return r.ratioMed
	}
	return r.cycles / r.ceiling
}

// mergeUncontended combines rounds of one library: medians of the rates and
// of the per-round ratios (each round's ceiling is measured beside it).
func mergeUncontended(rs []*uncontendedResult) *uncontendedResult {
	out := &uncontendedResult{goroutines: rs[0].goroutines, rounds: len(rs)}
	var cycles, ceilings, ratios []float64
	for _, r := range rs {
		out.errs.merge(&r.errs)
		if r.failure != "" && out.failure == "" {
			out.failure = r.failure
		}
		if r.ceiling > 0 {
			cycles, ceilings, ratios = append(cycles, r.cycles), append(ceilings, r.ceiling), append(ratios, r.cycles/r.ceiling)
		}
	}
	out.cycles, out.ceiling, out.ratioMed = median(cycles), median(ceilings), median(ratios)
	if len(ratios) > 0 { // median sorted them
		out.ratioLo, out.ratioHi = ratios[0], ratios[len(ratios)-1]
	}
	return out
}

// runUncontended measures one library instance: g goroutines, each locking
// and unlocking its own name, and g goroutines PINGing, for d each.
// Lock and Unlock get context.Background(), which never ends.
func runUncontended(ctx context.Context, spec libSpec, addr string, g int, d time.Duration) *uncontendedResult {
	res := &uncontendedResult{goroutines: g}
	l, err := spec.open(addr, false)
	if err != nil {
		res.failure = err.Error()
		return res
	}
	defer l.close()
	bg := context.Background()
	ms := make([]mutex, g)
	for i := range ms {
		ms[i] = l.mutex(fmt.Sprintf("bench:u%d:%s:%d", g, spec.name, i))
		if err := cycle(bg, ms[i]); err != nil { // loads the scripts
			res.failure = "warm-up: " + err.Error()
			return res
		}
	}
	// Warm up: let the pool dial its connections, unmeasured.
	var warm errCount
	hammer(ctx, g, 100*time.Millisecond, func(i int) error { return cycle(bg, ms[i]) }, &warm)
	hammer(ctx, g, 100*time.Millisecond, func(int) error { return l.ping(bg) }, &warm)
	// Alternate cycles and PINGs in thirds of d, so that a noisy moment on
	// the machine weighs on both.
	var pingErrs errCount
	third := d / 3
	for range 3 {
		res.cycles += hammer(ctx, g, third, func(i int) error { return cycle(bg, ms[i]) }, &res.errs) / 3
		res.ceiling += hammer(ctx, g, third, func(int) error { return l.ping(bg) }, &pingErrs) / 6
	}
	if pingErrs.n > 0 {
		res.failure = fmt.Sprintf("%d PING errors, first: %s", pingErrs.n, pingErrs.first[0])
	}
	return res
}

// cycle is one Lock then Unlock.
func cycle(ctx context.Context, m mutex) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	return m.unlock(ctx)
}
