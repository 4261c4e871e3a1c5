// Command fulfillment tells the duplicate-delivery story with dlock: order
// 1001 is delivered three times, three workers race for lock:order:1001, one
// ships it, a duplicate skips, and a worker that stalls past its lease loses
// the lock and has its late write rejected by the fencing token. The story
// itself is in internal/demo (also told by `dlock demo`).
//
// It runs against REDIS_URL, or an embedded in-process Redis when that is unset:
//
//	go run ./examples/fulfillment
//	REDIS_URL=redis://127.0.0.1:6379 go run ./examples/fulfillment
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlock-go/dlock/internal/demo"
	"github.com/redis/go-redis/v9"
)

func main() {
	rdb, where, stop, err := connect(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	fmt.Printf("order 1001 was delivered three times; three workers race for %s on %s\n\n", demo.LockName, where)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := demo.Run(ctx, rdb, demo.Options{Lease: time.Second, Out: os.Stdout})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nshipped %d time(s), by %s; %d duplicate(s) skipped; %d late write(s) rejected by fencing\n",
		res.Shipped, res.ShippedBy, res.Skipped, res.Rejected)
}

// connect returns a client for url, or for an embedded Redis when url is empty.
func connect(url string) (redis.UniversalClient, string, func(), error) {
	if url == "" {
		rdb, stop, err := demo.Embedded()
		return rdb, "an embedded in-process Redis (set REDIS_URL for a real one)", stop, err
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opt)
	return rdb, opt.Addr, func() { _ = rdb.Close() }, nil
}
