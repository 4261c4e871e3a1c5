package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverStats reads the server's INFO through its own connection.
type serverStats struct{ rdb *redis.Client }

func newServerStats(addr string) *serverStats {
	return &serverStats{rdb: redis.NewClient(&redis.Options{Addr: addr})}
}

func (s *serverStats) close() error { return s.rdb.Close() }

// info returns the fields of one INFO section.
func (s *serverStats) info(ctx context.Context, section string) (map[string]string, error) {
	text, err := s.rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s: %w", section, err)
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}

// usage is a sample of this process's CPU time and the server's counters.
type usage struct {
	at       time.Time
	cpu      time.Duration // this process, user + system
	commands uint64        // total_commands_processed
	extends  uint64        // PEXPIRE and PEXPIREAT calls, inside scripts too
	redisCPU float64       // used_cpu_user + used_cpu_sys, seconds
}

// rates are per wall second between two usage samples.
type rates struct {
	cpu      float64 // this process's CPU seconds per second
	commands float64 // Redis commands per second
	extends  float64 // PEXPIRE and PEXPIREAT calls per second
	redisCPU float64 // redis-server CPU seconds per second
}

// sample takes a usage sample now.
func (s *serverStats) sample(ctx context.Context) (usage, error) {
	u := usage{at: time.Now(), cpu: processCPU()}
	st, err := s.info(ctx, "stats")
	if err != nil {
		return u, err
	}
	cpu, err := s.info(ctx, "cpu")
	if err != nil {
		return u, err
	}
	cmds, err := s.info(ctx, "commandstats")
	if err != nil {
		return u, err
	}
	u.commands, _ = strconv.ParseUint(st["total_commands_processed"], 10, 64)
	u.extends = calls(cmds["cmdstat_pexpire"]) + calls(cmds["cmdstat_pexpireat"])
	user, _ := strconv.ParseFloat(cpu["used_cpu_user"], 64)
	sys, _ := strconv.ParseFloat(cpu["used_cpu_sys"], 64)
	u.redisCPU = user + sys
	return u, nil
}

// rates returns the rates from a to b.
func (a usage) rates(b usage) rates {
	sec := b.at.Sub(a.at).Seconds()
	return rates{
		cpu:      (b.cpu - a.cpu).Seconds() / sec,
		commands: float64(b.commands-a.commands) / sec,
		extends:  float64(b.extends-a.extends) / sec,
		redisCPU: (b.redisCPU - a.redisCPU) / sec,
	}
}

// calls reads calls=N from an INFO commandstats value.
func calls(stat string) uint64 {
	for f := range strings.SplitSeq(stat, ",") {
		if v, ok := strings.CutPrefix(f, "calls="); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// purge deletes the keys matching pattern that a failed release left
// behind, and returns how many it deleted.
func (s *serverStats) purge(ctx context.Context, pattern string) (int, error) {
	iter := s.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	n := 0
	flush := func() error {
		n += len(batch)
		err := s.rdb.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return n, err
	}
	if len(batch) > 0 {
		return n, flush()
	}
	return n, nil
}
