package dlock

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// NewRedlock returns a Client whose locks live on several independent Redis
// servers at once, the Redlock algorithm: a lock is held while a majority
// (N/2+1) of the servers hold it. The Mutex API is the same.
//
// Acquire runs on every server in parallel, each bounded by the node timeout
// (WithNodeTimeout; default a twentieth of the lease, between 50ms and 1s),
// and succeeds when a majority granted it within the lease's validity (lease
// minus the time it took minus the drift margin); otherwise what was taken is
// given back at once and the call waits and retries (the jittered backoff
// keeps two contenders from splitting the votes forever), or, when too few
// servers answer, fails with an error matching ErrNoQuorum. The watchdog
// renews on every server and the hold stays confirmed while a majority
// confirms it; when a majority can no longer be confirmed before the
// deadline, the hold is lost. Fencing tokens are the largest of the
// majority's counters, and each grant raises its majority's counters to the
// token it took, so tokens strictly increase per name (any two majorities
// share a server).
//
// The clients must reach distinct, independent primaries (no replicas of one
// another): *redis.Client or Sentinel failover clients; a Cluster or a Ring
// is refused. Release notices travel on the first client's server; with it
// down, waiters wait by backoff. See the README for when Redlock is worth its
// cost, and for what it cannot promise.
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(clients) == 0 {
		return nil, invalid("NewRedlock needs at least one client")
	}
	seen := map[redis.UniversalClient]bool{}
	for i, rdb := range clients {
		switch {
		case isNil(rdb):
			return nil, invalid("Redlock client %d is nil", i)
		case seen[rdb]:
			return nil, invalid("Redlock client %d is given twice: the servers must be distinct", i)
		}
		seen[rdb] = true
		switch rdb.(type) {
		case *redis.ClusterClient, *redis.Ring:
			return nil, invalid("Redlock client %d is a %T: Redlock needs independent single servers", i, rdb)
		}
	}
	c, err := newClient(clients[0], opts, func(c *Client) store { return newQuorum(clients, &c.cfg, c.pub) })
	if err == nil && c.redisson() {
		_ = c.Close()
		return nil, invalid("NewRedlock does not support WithRedissonCompat")
	}
	return c, err
}

// WithNodeTimeout bounds each server's part of an operation of a Redlock
// Client (NewRedlock): a server slower than this counts as not granting.
// Default: a twentieth of the lease, between 50ms and 1s. Zero or negative
// makes NewRedlock fail; New ignores it.
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, invalid("node timeout must be positive, got %v", d))
		}
		c.nodeTimeout = d
	}
}
