// Command fulfillment tells the duplicate-delivery story with dlock: order
// 1001 is delivered three times, three workers race for lock:order:1001, one
// ships it, a duplicate skips, and a worker that stalls past its lease loses
// the lock and has its late write rejected by the fencing token.
//
// It runs against REDIS_URL, or an embedded in-process Redis when that is unset:
//
//	go run ./examples/fulfillment
//	REDIS_URL=redis://127.0.0.1:6379 go run ./examples/fulfillment
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func main() {
	rdb, where, stop, err := connect(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	fmt.Printf("order 1001 was delivered three times; three workers race for lock:order:1001 on %s\n\n", where)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := run(ctx, rdb, os.Stdout, time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nshipped %d time(s), by %s; %d duplicate(s) skipped; %d late write(s) rejected by fencing\n",
		res.shipped, res.shippedBy, res.skipped, res.rejected)
}

// connect returns a client for url, or for an embedded Redis whose clock runs
// in real time when url is empty.
func connect(url string) (redis.UniversalClient, string, func(), error) {
	if url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		rdb := redis.NewClient(opt)
		return rdb, opt.Addr, func() { _ = rdb.Close() }, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, err
	}
	// miniredis moves TTLs only when told: advance its clock in real time.
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, "an embedded in-process Redis (set REDIS_URL for a real one)", func() {
		_ = rdb.Close()
		close(done)
		wg.Wait()
		mr.Close()
	}, nil
}

// timeline prints events with the time since the story began.
type timeline struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func (t *timeline) say(worker, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "%6.3fs  %-8s  %s\n", time.Since(t.start).Seconds(), worker, fmt.Sprintf(format, args...))
}
