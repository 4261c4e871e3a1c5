package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// redsyncTries is high enough that LockContext waits until its context ends
// instead of giving up after its default 32 tries.
const redsyncTries = 1_000_000

// redsyncLib is a redsync.Redsync on one go-redis pool.
type redsyncLib struct {
	rdb *redis.Client
	rs  *redsync.Redsync
}

// openRedsync builds goredis.NewPool + redsync.New with default options.
func openRedsync(addr string, _ bool) (lib, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return &redsyncLib{rdb: rdb, rs: redsync.New(goredis.NewPool(rdb))}, nil
}

// mutex returns a *redsync.Mutex with a 30s expiry and its default retry
// delay (random 50..250ms). A redsync.Mutex keeps the value of its current
// hold, so it must not be shared by goroutines: every handle gets its own.
func (l *redsyncLib) mutex(name string) mutex {
	return &redsyncMutex{m: l.rs.NewMutex(name, redsync.WithExpiry(30*time.Second), redsync.WithTries(redsyncTries))}
}

func (l *redsyncLib) ping(ctx context.Context) error { return l.rdb.Ping(ctx).Err() }

func (l *redsyncLib) close() error { return l.rdb.Close() }

// errNotReleased reports an unlock or extend that found another value.
var errNotReleased = errors.New("the lock was no longer ours")

type redsyncMutex struct{ m *redsync.Mutex }

func (m *redsyncMutex) lock(ctx context.Context) error { return m.m.LockContext(ctx) }

func (m *redsyncMutex) unlock(ctx context.Context) error {
	ok, err := m.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errNotReleased
	}
	return err
}

func (m *redsyncMutex) refresh(ctx context.Context) error {
	ok, err := m.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = errNotReleased
	}
	return err
}
