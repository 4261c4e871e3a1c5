package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Shape of the watchdog scenario.
const (
	wdGoroutines = 64              // acquire, refresh and release with this many
	wdInterval   = 5 * time.Second // every lock is renewed this often
	wdPoll       = 10 * time.Millisecond
	wdPhaseLimit = 2 * time.Minute // acquiring all N, or one refresh round, may take this long
	// wdReleaseLimit bounds releasing all N (not timed): past it, closing
	// the instance ends the remaining holds and leftover keys are deleted.
	wdReleaseLimit = 30 * time.Second
)

// watchdogResult is the cost of keeping n locks alive.
type watchdogResult struct {
	n          int
	failure    string
	acquire    time.Duration // acquiring all n with 64 goroutines
	roundTrips float64       // round trips to renew all n once; <0: not measured
	wall       time.Duration // wall time to renew all n once; <0: not applicable
	wallNote   string        // shown instead of wall when it is not applicable
	rates      rates         // over the window
	lost       int64         // holds lost, or renewals that failed
	detail     string
}

// runWatchdog holds n locks with one instance of the library, measures how
// it keeps them alive over window, and releases them (not timed).
func runWatchdog(ctx context.Context, spec libSpec, addr string, srv *serverStats, n int, window time.Duration) *watchdogResult {
	res := &watchdogResult{n: n, roundTrips: -1, wall: -1}
	l, err := spec.open(addr, true)
	if err != nil {
		res.failure = err.Error()
		return res
	}
	bg := context.Background() // holds live until released
	ms := make([]mutex, n)
	for i := range ms {
		ms[i] = l.mutex("bench:wd:" + strconv.Itoa(i))
	}

	held := make([]bool, n)
	var acqErrs errCount
	start := time.Now()
	made := forEach(ctx, n, wdGoroutines, start.Add(wdPhaseLimit), func(i int) error {
		if err := ms[i].lock(bg); err != nil {
			return err
		}
		held[i] = true
		return nil
	}, &acqErrs)
	res.acquire = time.Since(start)
	defer func() {
		// Release (not timed), close, and note what did not go cleanly.
		var notes []string
		start := time.Now()
		errs, done := release(ms, held)
		notes = append(notes, fmt.Sprintf("release (not timed) took %v", time.Since(start).Round(time.Millisecond)))
		if done < n {
			notes = append(notes, fmt.Sprintf("release stopped at the %v limit after %d of %d unlocks; Close ended the rest", wdReleaseLimit, done, n))
		}
		if errs.n > 0 {
			notes = append(notes, fmt.Sprintf("%d unlocks failed, first: %s", errs.n, errs.first[0]))
		}
		l.close()
		if left, err := srv.purge(context.Background(), "*bench:wd:*"); err != nil {
			notes = append(notes, "purging leftover keys: "+err.Error())
		} else if left > 0 {
			notes = append(notes, fmt.Sprintf("%d keys left in Redis after release and close (deleted)", left))
		}
		progress("  %s: %s", spec.name, strings.Join(notes, "; "))
		for _, note := range notes {
			if res.detail != "" {
				res.detail += "; "
			}
			res.detail += note
		}
	}()
	if made < n || acqErrs.n > 0 {
		res.failure = fmt.Sprintf("acquired %d of %d in %v", made-int(acqErrs.n), n, res.acquire.Round(time.Millisecond))
		if acqErrs.n > 0 {
			res.failure += fmt.Sprintf("; %d errors, first: %s", acqErrs.n, acqErrs.first[0])
		}
		return res
	}
	progress("  %s: %d locks acquired in %v", spec.name, n, res.acquire.Round(time.Millisecond))

	switch spec.renewal {
	case renewWatchdog:
		watchByWatchdog(ctx, l.(*dlockLib), ms, srv, window, res)
	case renewByHand:
		watchByHand(ctx, ms, srv, window, res)
	case renewPerLock:
		watchPerLock(ctx, ms, srv, window, res)
	}
	return res
}

// watchByWatchdog waits until every lock was renewed once, then reads dlock's
// counters over the window. The wall time to renew all n once is the sum of
// the passes' times (LastPass of each pass, polled every 10ms; a poll that
// finds k > 1 new passes counts the last one's time k times), scaled from
// the renewals of the window to n.
func watchByWatchdog(ctx context.Context, d *dlockLib, ms []mutex, srv *serverStats, window time.Duration, res *watchdogResult) {
	n := uint64(len(ms))
	base := d.stats().Renewals
	limit := time.Now().Add(3*wdInterval + res.acquire)
	for d.stats().Renewals < base+n {
		if time.Now().After(limit) || !sleepCtx(ctx, wdPoll) {
			res.failure = fmt.Sprintf("only %d of %d locks renewed within %v", d.stats().Renewals-base, n, 3*wdInterval+res.acquire)
			return
		}
	}
	runtime.GC()
	u0, err := srv.sample(ctx)
	if err != nil {
		res.failure = err.Error()
		return
	}
	s0 := d.stats()
	prev, sum, inferred := s0, time.Duration(0), uint64(0)
	tick := time.NewTicker(wdPoll)
	defer tick.Stop()
	for time.Since(u0.at) < window {
		select {
		case <-ctx.Done():
			res.failure = ctx.Err().Error()
			return
		case <-tick.C:
		}
		s := d.stats()
		if k := s.Passes - prev.Passes; k > 0 {
			sum += time.Duration(k) * s.LastPass
			inferred += k - 1
		}
		prev = s
	}
	u1, err := srv.sample(ctx)
	if err != nil {
		res.failure = err.Error()
		return
	}
	res.rates = u0.rates(u1)
	renewals := prev.Renewals - s0.Renewals
	if renewals == 0 {
		res.failure = "no renewal in the window"
		return
	}
	res.roundTrips = float64(prev.Pipelines-s0.Pipelines) * float64(n) / float64(renewals)
	res.wall = time.Duration(float64(sum) * float64(n) / float64(renewals))
	res.lost = int64(prev.Losses-s0.Losses) + notHeld(ms)
	res.detail = fmt.Sprintf("window: %d passes, %d pipelines, %d renewals, %d renewal errors; max pass %v (%d locks)",
		prev.Passes-s0.Passes, prev.Pipelines-s0.Pipelines, renewals, prev.RenewalErrors-s0.RenewalErrors,
		prev.MaxPass.Round(time.Microsecond), prev.MaxPassSize)
	if inferred > 0 {
		res.detail += fmt.Sprintf("; %d pass times inferred", inferred)
	}
}

// watchByHand renews every lock once with 64 goroutines (timed), then over
// the window starts such a round every 5s, the rate dlock renews at.
func watchByHand(ctx context.Context, ms []mutex, srv *serverStats, window time.Duration, res *watchdogResult) {
	var errs errCount
	round := func() time.Duration {
		start := time.Now()
		forEach(ctx, len(ms), wdGoroutines, start.Add(wdPhaseLimit), func(i int) error {
			return ms[i].(refresher).refresh(context.Background())
		}, &errs)
		return time.Since(start)
	}
	runtime.GC()
	res.wall = round()
	res.roundTrips = float64(len(ms))
	u0, err := srv.sample(ctx)
	if err != nil {
		res.failure = err.Error()
		return
	}
	// Rounds start at 0, 5s, ... within the window, each lock being
	// extended once per interval; the last one may end after the window.
	var (
		wg      sync.WaitGroup
		rounds  int
		slowest time.Duration
	)
	wg.Go(func() {
		for k := time.Duration(0); k*wdInterval < window; k++ {
			if !sleepCtx(ctx, time.Until(u0.at.Add(k*wdInterval))) {
				return
			}
			slowest = max(slowest, round())
			rounds++
		}
	})
	sleepCtx(ctx, time.Until(u0.at.Add(window)))
	u1, err := srv.sample(ctx)
	wg.Wait()
	if err != nil {
		res.failure = err.Error()
		return
	}
	res.rates = u0.rates(u1)
	res.lost = errs.n
	res.detail = fmt.Sprintf("window: %d refresh rounds, one every %v, slowest %v",
		rounds, wdInterval, slowest.Round(time.Millisecond))
	if errs.n > 0 {
		res.detail += fmt.Sprintf("; %d refresh errors, first: %s", errs.n, errs.first[0])
	}
}

// watchPerLock measures a library that extends each lock on its own timer.
func watchPerLock(ctx context.Context, ms []mutex, srv *serverStats, window time.Duration, res *watchdogResult) {
	runtime.GC()
	u0, err := srv.sample(ctx)
	if err != nil {
		res.failure = err.Error()
		return
	}
	sleepCtx(ctx, window)
	u1, err := srv.sample(ctx)
	if err != nil {
		res.failure = err.Error()
		return
	}
	res.rates = u0.rates(u1)
	res.roundTrips = float64(len(ms))
	res.wallNote = "n/a (per-lock goroutines)"
	res.lost = notHeld(ms)
	res.detail = fmt.Sprintf("one goroutine and timer per lock, each extending every %v", wdInterval)
}

// notHeld counts the handles that report their hold has ended.
func notHeld(ms []mutex) int64 {
	var n int64
	for _, m := range ms {
		if h, ok := m.(holder); ok && !h.held() {
			n++
		}
	}
	return n
}

// release unlocks every held lock with 64 goroutines, for at most
// wdReleaseLimit, and returns the errors and how many handles it went through.
func release(ms []mutex, held []bool) (*errCount, int) {
	errs := &errCount{}
	done := forEach(context.Background(), len(ms), wdGoroutines, time.Now().Add(wdReleaseLimit), func(i int) error {
		if !held[i] {
			return nil
		}
		return ms[i].unlock(context.Background())
	}, errs)
	return errs, done
}

// sleepCtx sleeps d and reports whether ctx is still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
