package dlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dlock-go/dlock"
)

// A FairMutex hands the lock out in arrival order across every process: here
// a second Client queues behind the holder and gets the lock as soon as the
// holder unlocks, woken by a notice addressed to it alone.
func ExampleFairMutex() {
	rdb, stop := exampleRedis()
	defer stop()
	a, _ := dlock.New(rdb)
	defer a.Close()
	b, _ := dlock.New(rdb)
	defer b.Close()
	ctx := context.Background()

	first := a.NewFairMutex("lock:payouts")
	if err := first.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("first holds it:", first.IsHeld(), "token > 0:", first.FencingToken() > 0)

	// TryLock with no wait makes one attempt and does not join the line.
	second := b.NewFairMutex("lock:payouts")
	ok, err := second.TryLock(ctx, 0)
	fmt.Println("second, one attempt:", ok, err)

	got := make(chan error)
	go func() { got <- second.Lock(ctx) }() // joins the line, waits for its turn
	if err := first.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("second's Lock:", <-got, "held:", second.IsHeld())
	fmt.Println("tokens increase:", second.FencingToken() > 0)
	_ = second.Unlock(ctx)
	// Output:
	// first holds it: true token > 0: true
	// second, one attempt: false <nil>
	// second's Lock: <nil> held: true
	// tokens increase: true
}

// TryLock with a wait queues for up to that long; when the wait runs out it
// reports false without an error and leaves the line. WithFairWaitTimeout
// sets how long a waiter that stopped asking (a crashed process) keeps its
// place before the others skip it.
func ExampleFairMutex_TryLock() {
	rdb, stop := exampleRedis()
	defer stop()
	client, _ := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	holder := client.NewFairMutex("lock:nightly-report")
	_ = holder.Lock(ctx)
	defer holder.Unlock(ctx)

	waiter := client.NewFairMutex("lock:nightly-report", dlock.WithFairWaitTimeout(2*time.Second))
	ok, err := waiter.TryLock(ctx, 100*time.Millisecond)
	fmt.Println("acquired:", ok, "err:", err)
	// Output:
	// acquired: false err: <nil>
}
