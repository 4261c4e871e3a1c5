package main

import (
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// redislockTTL is the lease of every bsm/redislock lock; Refresh renews it.
const redislockTTL = 30 * time.Second

// redislockLib is a redislock.Client on its own go-redis client.
type redislockLib struct {
	rdb *redis.Client
	c   *redislock.Client
}

// openRedislock builds redis.NewClient + redislock.New.
func openRedislock(addr string, _ bool) (lib, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return &redislockLib{rdb: rdb, c: redislock.New(rdb)}, nil
}

func (l *redislockLib) mutex(name string) mutex {
	m := &redislockMutex{c: l.c, key: name}
	m.opt.RetryStrategy = &m.retry
	return m
}

func (l *redislockLib) ping(ctx context.Context) error { return l.rdb.Ping(ctx).Err() }

func (l *redislockLib) close() error { return l.rdb.Close() }

// redislockMutex obtains key with an exponential backoff of 10..500ms, for as
// long as the context allows, and keeps the *redislock.Lock it got.
type redislockMutex struct {
	c     *redislock.Client
	key   string
	opt   redislock.Options
	retry lazyBackoff
	lk    *redislock.Lock
}

// lazyBackoff is redislock.ExponentialBackoff(10ms, 500ms), made fresh for
// every Obtain (the strategy counts its steps, so one cannot be reused) but
// only on the first retry: an Obtain that succeeds at once allocates no
// strategy, as a caller who builds one per call would also not need to.
type lazyBackoff struct{ s redislock.RetryStrategy }

func (b *lazyBackoff) NextBackoff() time.Duration {
	if b.s == nil {
		b.s = redislock.ExponentialBackoff(10*time.Millisecond, 500*time.Millisecond)
	}
	return b.s.NextBackoff()
}

func (m *redislockMutex) lock(ctx context.Context) error {
	m.retry.s = nil
	lk, err := m.c.Obtain(ctx, m.key, redislockTTL, &m.opt)
	if err != nil {
		return err
	}
	m.lk = lk
	return nil
}

func (m *redislockMutex) unlock(ctx context.Context) error {
	if m.lk == nil {
		return errors.New("redislock: unlock without a hold")
	}
	err := m.lk.Release(ctx)
	m.lk = nil
	return err
}

func (m *redislockMutex) refresh(ctx context.Context) error {
	if m.lk == nil {
		return errors.New("redislock: refresh without a hold")
	}
	return m.lk.Refresh(ctx, redislockTTL, nil)
}
