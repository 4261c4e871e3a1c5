package dlock

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
)

// Defaults of the Client's options.
const (
	// DefaultWatchdogTimeout is the lease of a hold taken without WithLeaseTime,
	// as in Redisson's lockWatchdogTimeout.
	DefaultWatchdogTimeout = 30 * time.Second
	// DefaultBackOffInitial is the first wait between attempts to acquire.
	DefaultBackOffInitial = 10 * time.Millisecond
	// DefaultBackOffMax caps the wait between attempts to acquire.
	DefaultBackOffMax = 500 * time.Millisecond
	// DefaultCloseTimeout bounds how long Close spends releasing held locks.
	DefaultCloseTimeout = 5 * time.Second
)

// A Client hands out locks on one Redis deployment and owns the watchdog that
// keeps them alive. Create it with New and end it with Close; its methods are
// safe for concurrent use. The zero value is not usable.
type Client struct {
	rdb    redis.UniversalClient
	cfg    config
	log    *slog.Logger
	clk    clock
	w      *watchdog
	st     store     // where the locks live
	n      *notifier // nil WithoutPubSub
	pub    string    // how releases are announced: "p" PUBLISH, "s" SPUBLISH, "" not
	pubArg any       // pub, boxed once
	obs    Observer  // nil: none

	owners atomic.Uint64 // owner ids handed out (WithRedissonCompat)

	closing   chan struct{} // closed by Close: waiters stop waiting
	closeOnce sync.Once
	closeErr  error
}

type config struct {
	watchdogTimeout time.Duration
	renewInterval   time.Duration // 0: watchdogTimeout / 3
	backOff         func() backoff.BackOff
	logger          *slog.Logger
	clock           clock
	batchSize       int
	closeTimeout    time.Duration
	noPubSub        bool
	nodeTimeout     time.Duration // Redlock: each server's share of an attempt
	redissonID      string        // WithRedissonCompat's client id, or ""
	ack             *replicaAck   // WithReplicaAck, or nil
	observer        Observer
	errs            []error // invalid options, reported by New
}

// An Option configures a Client in New.
type Option func(*config)

// WithWatchdogTimeout sets the lease of holds taken without WithLeaseTime; the
// watchdog renews it every renew interval for as long as the lock is held.
// Default 30s; zero or negative makes New fail.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *config) { c.watchdogTimeout = d }
}

// WithRenewInterval sets how often the watchdog renews a held lock. Default:
// the watchdog timeout / 3. Zero or negative, or not below the watchdog
// timeout, makes New fail.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, invalid("renew interval must be positive, got %v", d))
		}
		c.renewInterval = d
	}
}

// WithBackOff sets the wait strategy between attempts in Lock and TryLock: f
// is called once per call that has to wait. Each sleep is also capped by the
// holder's remaining lease and by the time left. A BackOff that returns
// backoff.Stop makes the caller sleep DefaultBackOffMax (capped likewise)
// between attempts, as does a negative step; when f returns nil the default
// is used. Default: DefaultBackOff. A nil f makes New fail.
func WithBackOff(f func() backoff.BackOff) Option {
	return func(c *config) {
		if f == nil {
			c.errs = append(c.errs, invalid("WithBackOff needs a function, got nil"))
			return
		}
		c.backOff = f
	}
}

// WithLogger sets where the Client logs: acquisitions (debug), renewal
// trouble (warn) and losses (warn), always with the lock's name and never its
// token above debug. Default, and with nil: no logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithRenewBatchSize sets how many locks one renewal script extends; a
// renewal pass sends all its batches in one pipeline. Default 500; zero or
// negative makes New fail.
func WithRenewBatchSize(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.errs = append(c.errs, invalid("renew batch size must be positive, got %d", n))
		}
		c.batchSize = n
	}
}

// WithCloseTimeout bounds how long Close waits for Redis while it releases
// the locks still held. Default 5s; zero or negative makes New fail.
func WithCloseTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, invalid("close timeout must be positive, got %v", d))
		}
		c.closeTimeout = d
	}
}

// WithoutPubSub turns notices off: releases are not announced and waiters
// wait by backoff alone (capped by the holder's remaining lease), as
// Redisson's spin lock does, for deployments that forbid pub/sub. Waiters on
// other Clients that use notices still acquire; they only learn of this
// Client's releases by backoff.
func WithoutPubSub() Option {
	return func(c *config) { c.noPubSub = true }
}

// withClock replaces the watchdog's clock (tests only).
func withClock(clk clock) Option {
	return func(c *config) { c.clock = clk }
}

// DefaultBackOff returns the default wait strategy: exponential from 10ms,
// doubling, each step jittered by ±50% and capped at 500ms, never giving up.
func DefaultBackOff() backoff.BackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     DefaultBackOffInitial,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         DefaultBackOffMax,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	return cappedBackOff{b, DefaultBackOffMax}
}

// cappedBackOff caps every step of b, jitter included, at most.
type cappedBackOff struct {
	b    backoff.BackOff
	most time.Duration
}

func (c cappedBackOff) NextBackOff() time.Duration {
	d := c.b.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	return min(d, c.most)
}

func (c cappedBackOff) Reset() { c.b.Reset() }

// New returns a Client that locks on rdb: a *redis.Client, a Sentinel failover
// client or a *redis.ClusterClient (a *redis.Ring is refused). It does not talk
// to Redis; scripts are loaded on first use. It fails with an error matching
// ErrInvalidArgument when rdb is nil or an option is invalid. Close the Client
// when done: it runs the watchdog's goroutines.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if isNil(rdb) {
		return nil, invalid("redis client is nil")
	}
	if _, ok := rdb.(*redis.Ring); ok {
		// A Ring shards by client-side hashing and moves keys when a shard
		// comes or goes: a lock and its fencing counter would silently move.
		return nil, invalid("*redis.Ring is not supported: use a single server, Sentinel (failover client) or Cluster")
	}
	return newClient(rdb, opts, func(c *Client) store { return newNode(rdb, &c.cfg, c.pub) })
}

// newClient validates the options and builds a Client on the store that
// mkStore makes; rdb carries the Client's notices.
func newClient(rdb redis.UniversalClient, opts []Option, mkStore func(*Client) store) (*Client, error) {
	cfg := config{
		watchdogTimeout: DefaultWatchdogTimeout,
		backOff:         DefaultBackOff,
		clock:           realClock{},
		batchSize:       500,
		closeTimeout:    DefaultCloseTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if len(cfg.errs) > 0 {
		return nil, cfg.errs[0]
	}
	if cfg.watchdogTimeout <= 0 {
		return nil, invalid("watchdog timeout must be positive, got %v", cfg.watchdogTimeout)
	}
	if cfg.renewInterval == 0 {
		cfg.renewInterval = cfg.watchdogTimeout / 3
	}
	if cfg.renewInterval >= cfg.watchdogTimeout {
		return nil, invalid("renew interval %v must be below the watchdog timeout %v", cfg.renewInterval, cfg.watchdogTimeout)
	}
	if usable := cfg.watchdogTimeout - leaseMargin(cfg.watchdogTimeout); cfg.renewInterval >= usable {
		return nil, invalid("renew interval %v leaves no time to renew: it must be below %v (the watchdog timeout %v less a drift margin)",
			cfg.renewInterval, usable, cfg.watchdogTimeout)
	}
	if cfg.renewInterval < time.Millisecond {
		return nil, invalid("renew interval %v is below 1ms", cfg.renewInterval)
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.redissonID != "" && !claimRedissonID(cfg.redissonID) {
		return nil, invalid("WithRedissonCompat: client id %q is used by another open Client of this process; "+
			"give each Client its own (owner fields would collide)", cfg.redissonID)
	}
	c := &Client{rdb: rdb, cfg: cfg, log: log, clk: cfg.clock, closing: make(chan struct{}), obs: cfg.observer}
	if !cfg.noPubSub {
		c.n = newNotifier(c)
		c.pub = "p"
		if _, ok := rdb.(*redis.ClusterClient); ok {
			c.pub = "s" // PUBLISH would be broadcast to every node
		}
	}
	c.pubArg = c.pub
	c.st = mkStore(c)
	c.w = newWatchdog(c)
	return c, nil
}

func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Close stops the watchdog, releases every lock still held through this
// Client (their Done channels close and Err reports ErrClosed), and makes
// later calls fail with ErrClosed. Waiting Lock and TryLock calls return
// ErrClosed. It waits for Redis at most the close timeout (or, when rdb does
// not honour context deadlines, up to its read timeout) and returns what went
// wrong releasing; locks it could not release expire with their lease.
// It does not close rdb. Calling it again returns nil.
func (c *Client) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closing)
		if c.n != nil {
			c.n.close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.closeTimeout)
		defer cancel()
		c.closeErr = c.w.close(ctx)
		if c.redisson() {
			releaseRedissonID(c.cfg.redissonID)
		}
	})
	if !first {
		return nil
	}
	return c.closeErr
}

func (c *Client) closed() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}
