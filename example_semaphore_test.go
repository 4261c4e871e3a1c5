package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// A Semaphore lets at most n callers in at once across the fleet. Its
// permits have no owner: whoever acquired them releases them.
func ExampleSemaphore() {
	rdb, stop := exampleRedis()
	defer stop()
	client, err := dlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	s := client.NewSemaphore("sem:api-quota")
	if _, err := s.TrySetPermits(ctx, 2); err != nil { // once, by whoever comes first
		log.Fatal(err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		log.Fatal(err)
	}
	left, _ := s.Available(ctx)
	fmt.Println("available while held:", left)
	ok, _ := s.TryAcquire(ctx, 2, 0) // two more: not now
	fmt.Println("two more at once:", ok)
	if err := s.Release(ctx, 1); err != nil {
		log.Fatal(err)
	}
	left, _ = s.Available(ctx)
	fmt.Println("available after release:", left)
	// Output:
	// available while held: 1
	// two more at once: false
	// available after release: 2
}

// An ExpirableSemaphore hands out permits with ids and leases: a permit
// whose holder dies comes back when its lease runs out. Lease 0 has the
// watchdog renew the permit until Release.
func ExampleExpirableSemaphore() {
	rdb, stop := exampleRedis()
	defer stop()
	client, err := dlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	s := client.NewExpirableSemaphore("sem:workers")
	if _, err := s.TrySetPermits(ctx, 1); err != nil {
		log.Fatal(err)
	}
	p, err := s.Acquire(ctx, 0) // renewed until Release
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fencing token > 0:", p.FencingToken() > 0)
	q, _ := s.TryAcquire(ctx, 10*time.Millisecond, time.Minute)
	fmt.Println("second permit:", q != nil)

	// Only the permit's id releases it.
	err = s.Release(ctx, "some other id")
	fmt.Println("wrong id:", errors.Is(err, dlock.ErrNotHeld))
	if err := s.Release(ctx, p.ID()); err != nil {
		log.Fatal(err)
	}
	<-p.Done()
	fmt.Println("released, err:", p.Err())
	// Output:
	// fencing token > 0: true
	// second permit: false
	// wrong id: true
	// released, err: <nil>
}

// A CountDownLatch lets waiters anywhere go once a count reaches zero.
func ExampleCountDownLatch() {
	rdb, stop := exampleRedis()
	defer stop()
	client, err := dlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	l := client.NewCountDownLatch("latch:shards-loaded")
	if _, err := l.TrySetCount(ctx, 3); err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { // in real code: three loaders, in any processes
			defer wg.Done()
			if err := l.CountDown(ctx); err != nil {
				log.Print(err)
			}
		}()
	}
	if err := l.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	n, _ := l.Count(ctx)
	fmt.Println("every shard loaded, count:", n)
	// Output:
	// every shard loaded, count: 0
}
