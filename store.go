package dlock

import (
	"context"
	"time"
)

// A store is where a Client's locks live: one Redis deployment (a server,
// Sentinel's primary, or a Cluster), or a quorum of independent servers
// (Redlock). Each method is one attempt; the Client does the waiting,
// retrying and bookkeeping around it.
type store interface {
	// acquire runs one acquire attempt for h's token on m's keys and
	// answers as acquire.lua does: the fencing token (> 0) when granted, or
	// -1 - PTTL (<= 0) when another token holds the lock.
	acquire(ctx context.Context, m *Mutex, h *hold) (int64, error)
	// release deletes h's key if it still holds h's token and announces it;
	// it answers as release.lua does (1 deleted, 0 gone, -1 other token,
	// -2 other type).
	release(ctx context.Context, h *hold) (int64, error)
	// renewOne extends one key that holds token, as renew.lua answers for it.
	renewOne(ctx context.Context, key, token string, lease time.Duration) (int64, error)
	// pass runs one watchdog pass: renewals and background releases.
	pass(ctx context.Context, batch []*entry) []result
	// inspect reads m's key type ("none", "string", "foreign" or a Redis
	// type), its PTTL in ms and the last fencing token of its slot.
	inspect(ctx context.Context, m *Mutex) (kind string, pttl, last int64, err error)
	// forceUnlock deletes m's key whatever its token: 1 deleted, 0 none,
	// -1 foreign data (kind names it), left alone.
	forceUnlock(ctx context.Context, m *Mutex) (status int64, kind string, err error)
	// pipelines is how many pipelines passes have sent.
	pipelines() uint64
}
