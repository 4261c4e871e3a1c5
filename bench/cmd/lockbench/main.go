// Command lockbench compares dlock with redsync, bsm/redislock and
// rueidislock on one redis-server: uncontended Lock+Unlock throughput against
// a PING ceiling, allocations per cycle, a contended hand-off between two
// Clients, and the cost of keeping 10,000 and 100,000 locks alive.
//
// It starts its own redis-server (from PATH) on a free loopback port unless
// -redis is given, prints the results as markdown and writes them, with the
// machine, the versions and the targets, to RESULTS.md. See ../../README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// config is what the flags asked for.
type config struct {
	redisAddr string
	out       string
	duration  time.Duration // each timed scenario, per round
	rounds    int           // rounds of the timed scenarios
	window    time.Duration // the watchdog scenario's measuring window
	locks     []int
	libs      []libSpec
	quick     bool
	command   string // the command line, for the report
}

// parseFlags reads args (args[0] is the program) into a config.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{}
	fs.StringVar(&cfg.redisAddr, "redis", "", "address of a Redis to use instead of starting redis-server")
	fs.StringVar(&cfg.out, "out", "RESULTS.md", "where to write the report")
	fs.DurationVar(&cfg.duration, "duration", time.Second, "length of each timed scenario in each round")
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds of the timed scenarios, libraries interleaved; the report quotes medians")
	locks := fs.String("locks", "10000,100000", "comma-separated numbers of locks held in the watchdog scenario")
	libs := fs.String("libs", "dlock,redsync,redislock,rueidislock,dlock-rw-write,dlock-rw-read,dlock-semaphore", "comma-separated libraries to run")
	fs.BoolVar(&cfg.quick, "quick", false, "smoke test: 300ms scenarios, 1000 watchdog locks, 5s window")
	if err := fs.Parse(args[1:]); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.libs, err = selectLibs(*libs); err != nil {
		return cfg, err
	}
	for _, s := range strings.Split(*locks, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("-locks: %q is not a positive number", s)
		}
		cfg.locks = append(cfg.locks, n)
	}
	if cfg.rounds <= 0 {
		return cfg, fmt.Errorf("-rounds must be positive, got %d", cfg.rounds)
	}
	if cfg.duration <= 0 {
		return cfg, fmt.Errorf("-duration must be positive, got %v", cfg.duration)
	}
	cfg.window = 10 * time.Second
	if cfg.quick {
		cfg.duration = 300 * time.Millisecond
		cfg.rounds = 1
		cfg.locks = []int{1000}
		cfg.window = 5 * time.Second
	}
	cfg.command = commandLine(args)
	return cfg, nil
}

// commandLine renders args as the command a reader can type again.
func commandLine(args []string) string {
	prog := filepath.Base(args[0])
	if strings.Contains(args[0], "go-build") { // go run's temporary binary
		prog = "go run ./cmd/lockbench"
	}
	parts := []string{prog}
	for _, a := range args[1:] {
		if a == "" || strings.ContainsAny(a, " \t\"'$\\") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// run is the whole program: args as os.Args, the report to stdout, progress
// to stderr. It stops the redis-server it started on every path.
func run(args []string, stdout io.Writer) error {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	addr := cfg.redisAddr
	if addr == "" {
		srv, err := startServer(ctx)
		if err != nil {
			return err
		}
		defer srv.stop()
		addr = srv.addr
	}
	started := time.Now()
	res, err := runAll(ctx, cfg, addr)
	if err != nil {
		return err
	}
	res.took = time.Since(started)
	report := render(cfg, res)
	if _, err := io.WriteString(stdout, report); err != nil {
		return err
	}
	return os.WriteFile(cfg.out, []byte(report), 0o644)
}

// progressStart is when the program started, for progress lines.
var progressStart = time.Now()

// progress tells the person running the benchmark where it is.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "lockbench %6.1fs: "+format+"\n",
		append([]any{time.Since(progressStart).Seconds()}, args...)...)
}
