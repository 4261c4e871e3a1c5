package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Shape of the contended scenario.
const (
	contendedClients    = 2
	contendedGoroutines = 8 // per Client
	contendedHold       = time.Millisecond
	contendedWork       = 10 * time.Millisecond
	// contendedGrace is how long after the scenario's end waiters may still
	// wait: their Lock context's deadline.
	contendedGrace = time.Second
)

// contendedResult is the hand-off of one name between 2 Clients × 8
// goroutines that each hold 1ms and then work 10ms outside the lock.
type contendedResult struct {
	acquisitions int64   // acquired before the end
	rate         float64 // acquisitions per second (median of rounds)
	ceiling      float64 // the round's ceiling (median of rounds)
	ratio        float64 // rate / ceiling (median of the rounds' ratios)
	rounds       int
	waitSamples  []time.Duration
	handSamples  []time.Duration
	wait         dist  // request to acquired
	handoff      dist  // previous holder's Unlock call to acquired
	overlaps     int64 // acquisitions while another goroutine held: must be 0
	errs         errCount
	failure      string
}

// runContended measures one library.
func runContended(ctx context.Context, spec libSpec, addr string, d time.Duration) *contendedResult {
	res := &contendedResult{}
	name := "bench:contended:" + spec.name
	var libs []lib
	defer func() {
		for _, l := range libs {
			l.close()
		}
	}()
	var handles []mutex
	for range contendedClients {
		l, err := spec.open(addr, false)
		if err != nil {
			res.failure = err.Error()
			return res
		}
		libs = append(libs, l)
		for range contendedGoroutines {
			handles = append(handles, l.mutex(name))
		}
	}
	// Warm up every handle (connections, scripts) before the clock starts.
	for _, h := range handles {
		if err := cycle(context.Background(), h); err != nil {
			res.failure = "warm-up: " + err.Error()
			return res
		}
	}

	base := time.Now()
	end := base.Add(d)
	lctx, cancel := context.WithDeadline(ctx, end.Add(contendedGrace))
	defer cancel()
	var (
		releaseStart atomic.Int64 // ns since base when the last holder began Unlock; 0: none yet
		holders      atomic.Int32
		acquired     atomic.Int64
		mu           sync.Mutex
		waits, hands []time.Duration
		wg           sync.WaitGroup
	)
	for _, h := range handles {
		wg.Go(func() {
			var myWaits, myHands []time.Duration
			defer func() {
				mu.Lock()
				waits, hands = append(waits, myWaits...), append(hands, myHands...)
				mu.Unlock()
			}()
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				err := h.lock(lctx)
				t1 := time.Now()
				if err != nil {
					if lctx.Err() != nil || !t1.Before(end) {
						return // the run is over: not a failure
					}
					res.errs.add(err)
					time.Sleep(contendedWork)
					continue
				}
				if holders.Add(1) != 1 {
					atomic.AddInt64(&res.overlaps, 1)
				}
				if t1.Before(end) {
					acquired.Add(1)
					myWaits = append(myWaits, t1.Sub(t0))
					// A hand-off: we were already waiting when the previous
					// holder began to unlock.
					if rs := releaseStart.Load(); rs != 0 && rs > int64(t0.Sub(base)) {
						myHands = append(myHands, t1.Sub(base)-time.Duration(rs))
					}
				}
				time.Sleep(contendedHold)
				holders.Add(-1)
				releaseStart.Store(int64(time.Since(base)))
				if err := h.unlock(context.Background()); err != nil && lctx.Err() == nil {
					res.errs.add(err)
				}
				time.Sleep(contendedWork)
			}
		})
	}
	wg.Wait()
	res.acquisitions = acquired.Load()
	res.rate = float64(res.acquisitions) / d.Seconds()
	res.waitSamples, res.handSamples = waits, hands
	res.wait, res.handoff = summarize(slices.Clone(waits)), summarize(slices.Clone(hands))
	return res
}

// mergeContended combines rounds of one library: medians of the rates and
// ratios, and percentiles over every round's samples together.
func mergeContended(rs []*contendedResult) *contendedResult {
	out := &contendedResult{rounds: len(rs)}
	var rates, ceilings, ratios []float64
	var waits, hands []time.Duration
	for _, r := range rs {
		out.errs.merge(&r.errs)
		out.overlaps += r.overlaps
		out.acquisitions += r.acquisitions
		if r.failure != "" {
			if out.failure == "" {
				out.failure = r.failure
			}
			continue
		}
		rates, ceilings = append(rates, r.rate), append(ceilings, r.ceiling)
		if r.ceiling > 0 {
			ratios = append(ratios, r.rate/r.ceiling)
		}
		waits, hands = append(waits, r.waitSamples...), append(hands, r.handSamples...)
	}
	if len(rates) > 0 {
		out.failure = ""
	}
	out.rate, out.ceiling, out.ratio = median(rates), median(ceilings), median(ratios)
	out.wait, out.handoff = summarize(waits), summarize(hands)
	return out
}

// contendedCeiling is what one goroutine achieves when the lock costs
// nothing but one round trip: sleep 1ms (the hold), then one PING, for d.
func contendedCeiling(ctx context.Context, addr string, d time.Duration) (float64, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	var errs errCount
	rate := hammer(ctx, 1, d, func(int) error {
		time.Sleep(contendedHold)
		return rdb.Ping(context.Background()).Err()
	}, &errs)
	if errs.n > 0 {
		return rate, errors.New(errs.first[0])
	}
	return rate, nil
}
