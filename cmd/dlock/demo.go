package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dlock-go/dlock/internal/demo"
	"github.com/redis/go-redis/v9"
)

var demoCmd = command{
	name:     "demo",
	synopsis: "demo [--redis URL] [--lease D] [--color auto|always|never]",
	about: `Tell the duplicate-delivery story live: order 1001 is delivered three times,
three workers race for lock:order:1001, one wins and ships, a duplicate waits
and then skips, and a worker that stalls past its lease loses the lock and its
late write is rejected by the fencing check. Runs on an embedded in-process
Redis unless --redis is given.`,
	examples: `  dlock demo
  dlock demo --redis redis://127.0.0.1:6379 --lease 2s
  dlock demo | cat                       # plain text when piped`,
}

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	var c common
	fs := newFlagSet(demoCmd)
	lease := fs.Duration("lease", time.Second, "each worker's fixed lease; the stalling worker freezes for 1.5 leases")
	color := fs.String("color", "auto", "colour: auto (on a terminal), always or never")
	c.add(fs)
	fs.Lookup("redis").Usage = "Redis URL (default: an embedded in-process Redis)"
	if code, ok := parse(fs, demoCmd, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs, demoCmd, "unexpected arguments %q", fs.Args())
	}
	if *lease <= 0 {
		return usageError(stderr, fs, demoCmd, "--lease must be positive")
	}
	useColor, ok := map[string]bool{"always": true, "never": false, "auto": isTerminal(stdout)}[*color]
	if !ok {
		return usageError(stderr, fs, demoCmd, "--color %q: want auto, always or never", *color)
	}
	if _, err := c.logger(stderr); err != nil {
		return usageError(stderr, fs, demoCmd, "%v", err)
	}
	ctx := context.Background()
	var (
		rdb   redis.UniversalClient
		where string
		err   error
	)
	if c.redisURL == "" {
		var stop func()
		if rdb, stop, err = demo.Embedded(); err != nil {
			fmt.Fprintf(stderr, "dlock demo: %v\n", err)
			return exitSoftware
		}
		defer stop()
		where = "an embedded in-process Redis"
	} else {
		if rdb, err = connect(ctx, c.redisURL); err != nil {
			fmt.Fprintf(stderr, "dlock demo: %v\n", err)
			return exitUnavailable
		}
		defer rdb.Close()
		where = c.redisURL
		_ = rdb.Del(ctx, demo.LockName).Err() // a fresh start
	}
	fmt.Fprintf(stdout, "Order 1001 was delivered three times. Three workers race for %s on %s.\n", demo.LockName, where)
	fmt.Fprintf(stdout, "Each holds it with a %v lease; the first to get it will freeze for %v.\n\n", *lease, *lease*3/2)
	rctx, cancel := context.WithTimeout(ctx, 20**lease+10*time.Second)
	defer cancel()
	res, err := demo.Run(rctx, rdb, demo.Options{Lease: *lease, Out: stdout, Color: useColor})
	if err != nil {
		fmt.Fprintf(stderr, "dlock demo: %v\n", err)
		return exitUnavailable
	}
	fmt.Fprintf(stdout, "\nShipped once (by %s); %d duplicate skipped; %d late write rejected by the fencing token.\n",
		res.ShippedBy, res.Skipped, res.Rejected)
	fmt.Fprintln(stdout, "Without the token, the frozen worker's write would have shipped the order twice.")
	return exitOK
}

// isTerminal reports whether w is a terminal that wants colour.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
