package dlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dlock-go/dlock"
)

// Readers share an RWMutex; a writer waits until they have left, and new
// readers wait behind a waiting writer. Every grant carries a fencing token.
func ExampleRWMutex() {
	rdb, stop := exampleRedis()
	defer stop()
	client, err := dlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	// Two readers, say in two processes, hold the lock at once.
	r1 := client.NewRWMutex("config:pricing")
	r2 := client.NewRWMutex("config:pricing")
	if err := r1.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := r2.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("readers hold:", r1.IsReadHeld(), r2.IsReadHeld())

	// A writer cannot go while they hold.
	w := client.NewRWMutex("config:pricing")
	ok, err := w.TryLock(ctx, 0)
	fmt.Println("writer beside readers:", ok, err)

	_ = r1.RUnlock(ctx)
	_ = r2.RUnlock(ctx)

	// Now the writer goes, with a token above every reader's.
	if err := w.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer holds:", w.IsWriteHeld(), "token > 0:", w.FencingToken() > 0)
	ok, err = r1.TryRLock(ctx, 0)
	fmt.Println("reader beside the writer:", ok, err)
	if err := w.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// readers hold: true true
	// writer beside readers: false <nil>
	// writer holds: true token > 0: true
	// reader beside the writer: false <nil>
}

// A reentrant handle counts its holds of one mode; the last RUnlock
// releases. It refuses the other mode while it holds one.
func ExampleRWMutex_RLock() {
	rdb, stop := exampleRedis()
	defer stop()
	client, _ := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	rw := client.NewRWMutex("catalog", dlock.WithReentrant())
	_ = rw.RLock(ctx)
	_ = rw.RLock(ctx)
	fmt.Println("count:", rw.HoldCount())
	fmt.Println("upgrade refused:", rw.Lock(ctx) != nil)
	_ = rw.RUnlock(ctx)
	_ = rw.RUnlock(ctx)
	fmt.Println("held:", rw.IsReadHeld())
	// Output:
	// count: 2
	// upgrade refused: true
	// held: false
}
