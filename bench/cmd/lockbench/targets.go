package main

import (
	"fmt"
	"strings"
	"time"
)

// A target is one goal for dlock, judged on this run's numbers.
type target struct {
	name   string
	pass   bool
	na     bool // not measured in this run
	detail string
}

// targets judges dlock against the goals of the benchmark.
func targets(r *results) []target {
	return []target{targetUncontended(r), targetAllocs(r), targetContended(r), targetWatchdog(r)}
}

func targetUncontended(r *results) target {
	t := target{name: "(a) uncontended, 1 goroutine: dlock ≥ 0.9 × its ceiling and ≥ bsm/redislock"}
	d, rl := r.uncontended1["dlock"], r.uncontended1["redislock"]
	if d == nil || rl == nil || d.failure != "" || rl.failure != "" {
		t.na, t.detail = true, "needs dlock and redislock measured without failure"
		return t
	}
	t.pass = d.cycles >= 0.9*d.ceiling && d.cycles >= rl.cycles
	t.detail = fmt.Sprintf("dlock %s cycles/s = %.2f × its ceiling %s (need ≥ 0.90); bsm/redislock %s cycles/s",
		num(d.cycles), d.ratio(), num(d.ceiling), num(rl.cycles))
	return t
}

func targetAllocs(r *results) target {
	t := target{name: "(b) allocations: dlock allocs/op ≤ rueidislock's"}
	d, ru := r.allocs["dlock"], r.allocs["rueidislock"]
	if d == nil || ru == nil || d.failure != "" || ru.failure != "" {
		t.na, t.detail = true, "needs dlock and rueidislock measured without failure"
		return t
	}
	t.pass = d.allocs <= ru.allocs
	t.detail = fmt.Sprintf("dlock %d allocs/op, rueidislock %d allocs/op", d.allocs, ru.allocs)
	return t
}

func targetContended(r *results) target {
	t := target{name: "(c) contended: dlock ≥ 0.8 × ceiling, above every peer, hand-off p99 < 2ms"}
	d := r.contended["dlock"]
	if d == nil || d.failure != "" || r.contendedCeiling <= 0 {
		t.na, t.detail = true, "needs dlock and the ceiling measured without failure"
		return t
	}
	ratio := d.ratio
	best, bestName := 0.0, ""
	var peers []string
	for _, l := range r.libs {
		if c := r.contended[l]; l != "dlock" && c != nil {
			peers = append(peers, fmt.Sprintf("%s %s", l, num(c.rate)))
			if c.rate > best {
				best, bestName = c.rate, l
			}
		}
	}
	t.pass = ratio >= 0.8 && d.rate > best && d.handoff.n > 0 && d.handoff.p99 < 2*time.Millisecond
	t.detail = fmt.Sprintf("dlock %s acquisitions/s = %.2f × ceiling %s (need ≥ 0.80); peers: %s (best %s); dlock hand-off p99 %s ms (need < 2)",
		num(d.rate), ratio, num(r.contendedCeiling), strings.Join(peers, ", "), bestName, ms(d.handoff.p99))
	return t
}

func targetWatchdog(r *results) target {
	t := target{name: "(d) 100,000 locks: dlock renews all once in < 1s wall time and ≤ 1000 round trips"}
	var w *watchdogResult
	for _, x := range r.watchdog["dlock"] {
		if x.n == 100_000 {
			w = x
		}
	}
	switch {
	case w == nil:
		t.na, t.detail = true, "100,000 locks not in -locks for this run"
		return t
	case w.failure != "":
		t.detail = "dlock failed: " + w.failure
		return t
	}
	t.pass = w.wall < time.Second && w.roundTrips <= 1000
	t.detail = fmt.Sprintf("wall time %s ms (need < 1000), round trips %s (need ≤ 1000)", ms(w.wall), num(w.roundTrips))
	return t
}

// renderTargets writes the Targets section.
func renderTargets(b *strings.Builder, _ config, r *results) {
	b.WriteString("## Targets\n\n")
	for _, t := range targets(r) {
		verdict := "MISS"
		switch {
		case t.na:
			verdict = "N/A"
		case t.pass:
			verdict = "PASS"
		}
		fmt.Fprintf(b, "- **%s** %s: %s\n", verdict, t.name, t.detail)
		if verdict == "MISS" {
			b.WriteString("  - Why: TODO (explain this miss)\n")
		}
	}
	b.WriteString("\n")
}
