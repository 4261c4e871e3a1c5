package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// roundsOf is how many rounds the timed scenarios ran.
func roundsOf(r *results) int {
	for _, c := range r.contended {
		return c.rounds
	}
	return 1
}

// render returns the whole report as markdown.
func render(cfg config, r *results) string {
	var b strings.Builder
	m := r.machine
	fmt.Fprintf(&b, "# Lock benchmark results\n\n")
	fmt.Fprintf(&b, "- Date: %s (the run took %v)\n", m.date, r.took.Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s, %d cores, Linux %s\n", m.cpu, m.cores, m.kernel)
	fmt.Fprintf(&b, "- Go: %s; redis-server %s on loopback\n", m.goVersion, m.redisVersion)
	b.WriteString("- Libraries:\n")
	for _, v := range m.versions {
		fmt.Fprintf(&b, "  - %s: %s\n", v[0], v[1])
	}
	fmt.Fprintf(&b, "- Command: `%s`\n\n", cfg.command)
	b.WriteString("Each \"Client\" is one instance of the library with its own connection pool, default options unless said otherwise, all on the same redis-server. The machine is shared; numbers move by 10-20% between runs.\n\n")

	renderUncontended(&b, r)
	renderAllocs(&b, r)
	renderContended(&b, r)
	renderWatchdog(&b, cfg, r)
	renderTargets(&b, cfg, r)
	return b.String()
}

func renderUncontended(b *strings.Builder, r *results) {
	b.WriteString("## Uncontended Lock+Unlock\n\n")
	b.WriteString("| Library | 1 goroutine: cycles/s | ceiling | ratio | 64 goroutines: cycles/s | ceiling | ratio |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	cell := func(u *uncontendedResult) string {
		if u == nil {
			return "- | - | -"
		}
		if u.failure != "" && u.cycles == 0 {
			return "FAILED: " + esc(u.failure) + " | - | -"
		}
		return fmt.Sprintf("%s | %s | %.2f", num(u.cycles), num(u.ceiling), u.ratio())
	}
	for _, l := range r.libs {
		fmt.Fprintf(b, "| %s | %s | %s |\n", l, cell(r.uncontended1[l]), cell(r.uncontended64[l]))
	}
	fmt.Fprintf(b, "\nMedians of %d rounds; in each round every library runs once (the first one rotating), with its ceiling measured beside it, and the ratio is the median of the rounds' ratios. ", roundsOf(r))
	b.WriteString("A cycle is Lock then Unlock on the goroutine's own name, through a handle reused for every cycle, with `context.Background()`. " +
		"Ceiling: PING round trips per second through the same connection pool with the same number of goroutines, divided by 2 (a cycle needs two round trips). " +
		"go-redis pools hold 10 connections per GOMAXPROCS by default; rueidis pipelines concurrent callers on one connection, so its 64-goroutine ceiling is higher.\n")
	errNotes(b, r.libs, func(l string) (*errCount, string) {
		if u := r.uncontended1[l]; u != nil {
			return &u.errs, "1 goroutine"
		}
		return nil, ""
	})
	errNotes(b, r.libs, func(l string) (*errCount, string) {
		if u := r.uncontended64[l]; u != nil {
			return &u.errs, "64 goroutines"
		}
		return nil, ""
	})
	b.WriteString("\n")
}

func renderAllocs(b *strings.Builder, r *results) {
	b.WriteString("## Allocations per Lock+Unlock\n\n")
	b.WriteString("| Library | allocs/op | B/op | ns/op | Redis µs/cycle |\n|---|---:|---:|---:|---:|\n")
	for _, l := range r.libs {
		a := r.allocs[l]
		switch {
		case a == nil:
			fmt.Fprintf(b, "| %s | - | - | - | - |\n", l)
		case a.failure != "":
			fmt.Fprintf(b, "| %s | FAILED: %s | - | - | - |\n", l, esc(a.failure))
		default:
			fmt.Fprintf(b, "| %s | %d | %s | %s | %.1f |\n", l, a.allocs, num(float64(a.bytes)), num(float64(a.ns)), a.serverUS)
		}
	}
	b.WriteString("\n`testing.Benchmark` of one Lock+Unlock cycle on a reused handle, one goroutine, `context.Background()`. " +
		"Redis µs/cycle: the server's execution time for one cycle's commands, scripts included (INFO commandstats over 2,000 cycles). " +
		"Allocations are counted process-wide, so they include the library's own goroutines serving the cycle. " +
		"bsm/redislock wraps a context without deadline in one of its TTL (its guard against retrying forever); that is part of its count. " +
		"Its retry strategy (`ExponentialBackoff(10ms, 500ms)`, stateful) is made only on a first retry, so the uncontended cycle does not pay for it.\n")
	errNotes(b, r.libs, func(l string) (*errCount, string) {
		if a := r.allocs[l]; a != nil {
			return &a.errs, "benchmark"
		}
		return nil, ""
	})
	b.WriteString("\n")
}

func renderContended(b *strings.Builder, r *results) {
	b.WriteString("## Contended: 2 Clients × 8 goroutines on one name\n\n")
	fmt.Fprintf(b, "Ceiling: %s iterations/s (median) of one goroutine doing `time.Sleep(1ms)` then one PING", num(r.contendedCeiling))
	if r.ceilingErr != "" {
		fmt.Fprintf(b, " (errors: %s)", esc(r.ceilingErr))
	}
	b.WriteString(".\n\n")
	b.WriteString("| Library | acquisitions/s | ratio to ceiling | wait p50 | wait p99 | wait max | hand-off p50 | hand-off p99 | hand-off max | hand-offs | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range r.libs {
		c := r.contended[l]
		switch {
		case c == nil:
			fmt.Fprintf(b, "| %s |%s\n", l, strings.Repeat(" - |", 10))
		case c.failure != "":
			fmt.Fprintf(b, "| %s | FAILED: %s |%s\n", l, esc(c.failure), strings.Repeat(" - |", 9))
		default:
			fmt.Fprintf(b, "| %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %d | %d |\n", l,
				num(c.rate), c.ratio,
				ms(c.wait.p50), ms(c.wait.p99), ms(c.wait.max),
				ms(c.handoff.p50), ms(c.handoff.p99), ms(c.handoff.max), c.handoff.n, c.errs.n)
		}
	}
	fmt.Fprintf(b, "\nMedians of %d rounds (libraries interleaved, the ceiling measured in each round; the ratio is the median of the rounds' ratios); wait and hand-off percentiles are over every round's samples together. ", roundsOf(r))
	b.WriteString("Each goroutine has its own handle on the name and loops: request (t0), acquired (t1), hold 1ms, note the time, Unlock, work 10ms outside the lock. " +
		"Wait = t1 - t0. Hand-off = t1 - the moment the previous holder called Unlock, counted only when the acquirer was already waiting then. " +
		"Lock gets a context ending 1s after the scenario; lock errors from that deadline are not counted. Times in ms. " +
		"How each waits: dlock its default backoff (10..500ms, jittered) woken early by release notices (pub/sub); " +
		"redsync its default retry delay (random 50..250ms) with `WithTries(1000000)` so it never gives up, which is what its users get; " +
		"bsm/redislock `ExponentialBackoff(10ms, 500ms)`; rueidislock client-side-caching invalidations.\n")
	for _, l := range r.libs {
		if c := r.contended[l]; c != nil && c.overlaps > 0 {
			fmt.Fprintf(b, "\n**%s: %d acquisitions while another goroutine held the lock.**\n", l, c.overlaps)
		}
	}
	errNotes(b, r.libs, func(l string) (*errCount, string) {
		if c := r.contended[l]; c != nil {
			return &c.errs, "contended"
		}
		return nil, ""
	})
	b.WriteString("\n")
}

func renderWatchdog(b *strings.Builder, cfg config, r *results) {
	fmt.Fprintf(b, "## Keeping N locks alive (window %v)\n\n", cfg.window)
	b.WriteString("| Library | N | round trips to renew all N once | wall time to renew all N once | CPU s/s (this process) | Redis commands/s | extensions/s (N/5s expected) | Redis CPU s/s | lost | acquiring N took | details |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for i, n := range cfg.locks {
		for _, l := range r.libs {
			ws := r.watchdog[l]
			if i >= len(ws) {
				continue
			}
			w := ws[i]
			if w.failure != "" {
				fmt.Fprintf(b, "| %s | %s | FAILED: %s | - | - | - | - | - | - | %v | %s |\n", l, num(float64(n)), esc(w.failure),
					w.acquire.Round(time.Millisecond), esc(w.detail))
				continue
			}
			wall := w.wallNote
			if w.wall >= 0 {
				wall = ms(w.wall) + " ms"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %.3f | %s | %s (%s) | %.3f | %d | %v | %s |\n", l, num(float64(n)),
				num(w.roundTrips), wall, w.rates.cpu, num(w.rates.commands),
				num(w.rates.extends), num(float64(n)/wdInterval.Seconds()), w.rates.redisCPU, w.lost,
				w.acquire.Round(time.Millisecond), esc(w.detail))
		}
	}
	b.WriteString("\nOne Client holds N locks (`bench:wd:<i>`, acquired with 64 goroutines) and every lock is renewed every 5s. " +
		"**dlock**: lease 15s, renew interval 5s; measured after every lock was renewed once. Round trips = pipelines × N / renewals over the window. " +
		"Wall time = the sum of the window's renewal passes (each pass's `LastPass`, read by polling `Stats` every 10ms; when a poll finds several new passes, the last one's time counts for each) × N / renewals. " +
		"**redsync, bsm/redislock** (no watchdog): one extend or refresh per lock with 64 goroutines, so N round trips; the wall time is one such round, timed before the window; " +
		"over the window a round starts every 5s. **rueidislock**: validity 15s, extend interval 5s; each lock has its own goroutine and timer and extends itself: N round trips per interval, no pass to time. " +
		"CPU s/s: this process's user+system CPU time (getrusage) per wall second over the window; the machine has " + strconv.Itoa(r.machine.cores) + " cores, shared with redis-server. " +
		"Redis commands/s: `total_commands_processed` (commands inside scripts count) per second; extensions/s: PEXPIRE and PEXPIREAT calls per second (`INFO commandstats`), against N/5s if each lock were extended once per interval; Redis CPU s/s from `INFO cpu`. " +
		"rueidislock with its default `NoLoopTracking: false` is invalidated by its own extend (the key it tracks changed) and extends again on that invalidation, so from the first extend on each lock is extended continuously; that shows in extensions/s. " +
		"Lost: holds that ended or renewals that failed. Locks are released after each case, not timed.\n\n")
}

// errNotes lists the errors some libraries had in a scenario.
func errNotes(b *strings.Builder, libs []string, get func(string) (*errCount, string)) {
	for _, l := range libs {
		e, what := get(l)
		if e == nil || e.n == 0 {
			continue
		}
		fmt.Fprintf(b, "\n%s, %s: %d errors; first: %s\n", l, what, e.n, esc(strings.Join(e.first, "; ")))
	}
}

// num formats f rounded, with thousands separators.
func num(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "n/a"
	}
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// esc keeps text from breaking a markdown table.
func esc(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
