package main

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// dlockLib is a dlock.Client on its own go-redis client.
type dlockLib struct {
	rdb *redis.Client
	c   *dlock.Client
}

// openDlock builds redis.NewClient + dlock.New with default options; for the
// watchdog scenario a 15s lease renewed every 5s.
func openDlock(addr string, watchdog bool) (lib, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	var opts []dlock.Option
	if watchdog {
		opts = append(opts, dlock.WithWatchdogTimeout(15*time.Second), dlock.WithRenewInterval(5*time.Second))
	}
	c, err := dlock.New(rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &dlockLib{rdb: rdb, c: c}, nil
}

func (l *dlockLib) mutex(name string) mutex { return &dlockMutex{m: l.c.NewMutex(name)} }

func (l *dlockLib) ping(ctx context.Context) error { return l.rdb.Ping(ctx).Err() }

func (l *dlockLib) close() error {
	return errors.Join(l.c.Close(), l.rdb.Close())
}

// stats returns the Client's watchdog counters.
func (l *dlockLib) stats() dlock.Stats { return l.c.Stats() }

// dlockMutex is a reused *dlock.Mutex.
type dlockMutex struct{ m *dlock.Mutex }

func (m *dlockMutex) lock(ctx context.Context) error   { return m.m.Lock(ctx) }
func (m *dlockMutex) unlock(ctx context.Context) error { return m.m.Unlock(ctx) }
func (m *dlockMutex) held() bool                       { return m.m.IsHeld() }
