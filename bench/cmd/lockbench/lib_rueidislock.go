package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidisLib is a rueidislock.Locker, which owns its rueidis.Client.
type rueidisLib struct{ l rueidislock.Locker }

// openRueidislock builds a Locker on one key per lock (KeyMajority 1: one
// Redis, as for the others) with default options; for the watchdog scenario
// a 15s validity extended every 5s.
func openRueidislock(addr string, watchdog bool) (lib, error) {
	opt := rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:  1,
	}
	if watchdog {
		opt.KeyValidity = 15 * time.Second
		opt.ExtendInterval = 5 * time.Second
	}
	l, err := rueidislock.NewLocker(opt)
	if err != nil {
		return nil, err
	}
	return &rueidisLib{l: l}, nil
}

func (l *rueidisLib) mutex(name string) mutex { return &rueidisMutex{l: l.l, name: name} }

func (l *rueidisLib) ping(ctx context.Context) error {
	c := l.l.Client()
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

func (l *rueidisLib) close() error {
	l.l.Close()
	return nil
}

// rueidisMutex keeps the context and cancel function of its current hold:
// cancel releases the lock and returns once the key is deleted.
type rueidisMutex struct {
	l      rueidislock.Locker
	name   string
	ctx    context.Context
	cancel context.CancelFunc
}

func (m *rueidisMutex) lock(ctx context.Context) error {
	hctx, cancel, err := m.l.WithContext(ctx, m.name)
	if err != nil {
		return err
	}
	m.ctx, m.cancel = hctx, cancel
	return nil
}

func (m *rueidisMutex) unlock(context.Context) error {
	if m.cancel == nil {
		return errors.New("rueidislock: unlock without a hold")
	}
	lost := m.ctx.Err() // the hold ended before we released it
	m.cancel()
	m.ctx, m.cancel = nil, nil
	if lost != nil {
		return errors.New("rueidislock: the hold had ended before unlock")
	}
	return nil
}

func (m *rueidisMutex) held() bool { return m.ctx != nil && m.ctx.Err() == nil }
