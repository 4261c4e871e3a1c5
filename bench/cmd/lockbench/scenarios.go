package main

import (
	"context"
	"slices"
	"time"
)

// results are everything one run measured, by library name.
type results struct {
	machine          machine
	libs             []string
	uncontended1     map[string]*uncontendedResult
	uncontended64    map[string]*uncontendedResult
	allocs           map[string]*allocResult
	contendedCeiling float64
	ceilingErr       string
	contended        map[string]*contendedResult
	watchdog         map[string][]*watchdogResult // in the order of -locks
	took             time.Duration
}

// runAll runs every scenario for every library, scenario by scenario, so that
// a noisy moment on the machine does not fall on one library alone.
func runAll(ctx context.Context, cfg config, addr string) (*results, error) {
	srv := newServerStats(addr)
	defer srv.close()
	res := &results{
		machine:       describeMachine(ctx, srv),
		uncontended1:  map[string]*uncontendedResult{},
		uncontended64: map[string]*uncontendedResult{},
		allocs:        map[string]*allocResult{},
		contended:     map[string]*contendedResult{},
		watchdog:      map[string][]*watchdogResult{},
	}
	for _, s := range cfg.libs {
		res.libs = append(res.libs, s.name)
	}
	// The timed scenarios run in rounds; in each round every library runs
	// once, the first one rotating, and the report quotes medians, so that a
	// noisy moment on the shared machine does not decide a comparison.
	u1, u64 := map[string][]*uncontendedResult{}, map[string][]*uncontendedResult{}
	cont := map[string][]*contendedResult{}
	var ceilings []float64
	for round := range cfg.rounds {
		order := append(slices.Clone(cfg.libs[round%len(cfg.libs):]), cfg.libs[:round%len(cfg.libs)]...)
		for _, s := range order {
			progress("round %d/%d: uncontended, 1 goroutine: %s", round+1, cfg.rounds, s.name)
			u1[s.name] = append(u1[s.name], runUncontended(ctx, s, addr, 1, cfg.duration))
			progress("round %d/%d: uncontended, 64 goroutines: %s", round+1, cfg.rounds, s.name)
			u64[s.name] = append(u64[s.name], runUncontended(ctx, s, addr, 64, cfg.duration))
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		progress("round %d/%d: contended ceiling (sleep 1ms + PING)", round+1, cfg.rounds)
		ceiling, err := contendedCeiling(ctx, addr, cfg.duration)
		if err != nil {
			res.ceilingErr = err.Error()
		}
		ceilings = append(ceilings, ceiling)
		for _, s := range order {
			if s.shared {
				continue
			}
			progress("round %d/%d: contended: %s", round+1, cfg.rounds, s.name)
			c := runContended(ctx, s, addr, cfg.duration)
			c.ceiling = ceiling
			cont[s.name] = append(cont[s.name], c)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range cfg.libs {
		res.uncontended1[s.name] = mergeUncontended(u1[s.name])
		res.uncontended64[s.name] = mergeUncontended(u64[s.name])
		if !s.shared {
			res.contended[s.name] = mergeContended(cont[s.name])
		}
	}
	res.contendedCeiling = median(ceilings)
	for _, s := range cfg.libs {
		progress("allocations: %s", s.name)
		res.allocs[s.name] = runAllocs(s, addr)
	}
	for _, n := range cfg.locks {
		for _, s := range cfg.libs {
			if s.family {
				continue
			}
			progress("watchdog, %d locks: %s", n, s.name)
			r := runWatchdog(ctx, s, addr, srv, n, cfg.window)
			if r.failure != "" {
				progress("  %s failed: %s", s.name, r.failure)
			}
			res.watchdog[s.name] = append(res.watchdog[s.name], r)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}
