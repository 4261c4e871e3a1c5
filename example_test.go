package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// exampleRedis stands in for your Redis: any go-redis client works, such as
// redis.NewClient(&redis.Options{Addr: "localhost:6379"}).
func exampleRedis() (redis.UniversalClient, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { _ = rdb.Close(); mr.Close() }
}

// WithLock is the simplest correct use: the function runs while the lock is
// held and gets a context that ends if the lock is lost, and the fencing token
// to hand to storage.
func ExampleClient_WithLock() {
	rdb, stop := exampleRedis()
	defer stop()
	client, err := dlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	err = client.WithLock(context.Background(), "lock:order:1001", func(ctx context.Context, token int64) error {
		// In real code: UPDATE ... SET lock_token = token WHERE ... AND lock_token < token
		fmt.Println("shipping order 1001, token > 0:", token > 0)
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// shipping order 1001, token > 0: true
	// err: <nil>
}

// Lock waits as long as its context allows; the hold stays bound to that
// context, and the watchdog renews it until Unlock.
func ExampleMutex_Lock() {
	rdb, stop := exampleRedis()
	defer stop()
	client, _ := dlock.New(rdb)
	defer client.Close()

	m := client.NewMutex("lock:report")
	if err := m.Lock(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", m.IsHeld(), "count:", m.HoldCount())
	if err := m.Unlock(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", m.IsHeld())
	// Output:
	// held: true count: 1
	// held: false
}

// TryLock waits a bounded time and reports false, without an error, when the
// lock stays busy.
func ExampleMutex_TryLock() {
	rdb, stop := exampleRedis()
	defer stop()
	a, _ := dlock.New(rdb)
	defer a.Close()
	b, _ := dlock.New(rdb)
	defer b.Close()
	ctx := context.Background()

	if err := a.NewMutex("lock:nightly").Lock(ctx); err != nil {
		log.Fatal(err)
	}
	ok, err := b.NewMutex("lock:nightly").TryLock(ctx, 50*time.Millisecond)
	fmt.Println("second worker acquired:", ok, "err:", err)
	// Output:
	// second worker acquired: false err: <nil>
}

// Done closes and Err says why when a hold ends without Unlock, for example
// when an operator force-unlocks it.
func ExampleMutex_Done() {
	rdb, stop := exampleRedis()
	defer stop()
	client, _ := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	m := client.NewMutex("lock:job")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	_, _ = m.ForceUnlock(ctx) // as an operator would
	<-m.Done()
	fmt.Println("lost:", errors.Is(m.Err(), dlock.ErrLockLost))
	fmt.Println("unlock:", errors.Is(m.Unlock(ctx), dlock.ErrLockLost))
	// Output:
	// lost: true
	// unlock: true
}

// Options tune the watchdog: here a 6s lease renewed every 2s.
func ExampleNew() {
	rdb, stop := exampleRedis()
	defer stop()
	client, err := dlock.New(rdb,
		dlock.WithWatchdogTimeout(6*time.Second),
		dlock.WithRenewInterval(2*time.Second),
	)
	fmt.Println(err)
	defer client.Close()

	_, err = dlock.New(rdb, dlock.WithRenewInterval(10*time.Second), dlock.WithWatchdogTimeout(6*time.Second))
	fmt.Println(errors.Is(err, dlock.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}

// A fixed lease is not renewed: the hold ends when it runs out (Redisson's
// tryLock(wait, lease)).
func ExampleWithLeaseTime() {
	rdb, stop := exampleRedis()
	defer stop()
	client, _ := dlock.New(rdb)
	defer client.Close()

	m := client.NewMutex("lock:cache-refresh", dlock.WithLeaseTime(20*time.Millisecond))
	if err := m.Lock(context.Background()); err != nil {
		log.Fatal(err)
	}
	<-m.Done()
	fmt.Println(errors.Is(m.Err(), dlock.ErrLockLost))
	// Output:
	// true
}

// A reentrant handle may lock again while it holds the lock; only the last
// Unlock releases it.
func ExampleWithReentrant() {
	rdb, stop := exampleRedis()
	defer stop()
	client, _ := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	m := client.NewMutex("lock:tree", dlock.WithReentrant())
	_ = m.Lock(ctx)
	_ = m.Lock(ctx)
	fmt.Println(m.HoldCount())
	_ = m.Unlock(ctx)
	fmt.Println(m.HoldCount(), m.IsHeld())
	_ = m.Unlock(ctx)
	fmt.Println(m.HoldCount(), m.IsHeld())
	// Output:
	// 2
	// 1 true
	// 0 false
}

// A MultiMutex holds several locks as one: all of them or none, each with its
// own fencing token.
func ExampleMultiMutex() {
	rdb, stop := exampleRedis()
	defer stop()
	c, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	transfer := c.NewMultiMutex([]string{"account:alice", "account:bob"})
	if err := transfer.Lock(ctx); err != nil {
		panic(err)
	}
	tokens := transfer.FencingTokens()
	fmt.Println(len(tokens), tokens["account:alice"] > 0, tokens["account:bob"] > 0)
	if err := transfer.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: 2 true true
}

// WithRedissonCompat keeps locks as Redisson does, so that Go and Java
// services on Redisson exclude each other on the same names.
func ExampleWithRedissonCompat() {
	rdb, stop := exampleRedis()
	defer stop()
	// Each Client its own id, as each Redisson client has its own UUID.
	c, err := dlock.New(rdb, dlock.WithRedissonCompat("9b2f4d1e-8c3a-4e5f-a6b7-c8d9e0f1a2b3"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	m := c.NewMutex("orders:42", dlock.WithReentrant())
	if err := m.Lock(ctx); err != nil {
		panic(err)
	}
	// Redisson's RLock: a hash at the name, field <clientID>:<ownerID> = hold count.
	fields, _ := rdb.HGetAll(ctx, "orders:42").Result()
	for field, count := range fields {
		fmt.Println(strings.HasPrefix(field, "9b2f4d1e-8c3a-4e5f-a6b7-c8d9e0f1a2b3:go-"), count)
	}
	if err := m.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: true 1
}
