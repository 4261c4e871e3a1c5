package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// quorum is the Redlock store: the same lock on N independent servers, held
// while a majority of them hold it. Every operation runs on all servers in
// parallel, each bounded by the node timeout.
type quorum struct {
	nodes   []*node
	need    int           // N/2 + 1
	timeout time.Duration // each node's share of an attempt; 0: from the lease
	cfg     *config
}

func newQuorum(clients []redis.UniversalClient, cfg *config, pub string) *quorum {
	q := &quorum{need: len(clients)/2 + 1, timeout: cfg.nodeTimeout, cfg: cfg}
	for _, rdb := range clients {
		q.nodes = append(q.nodes, newNode(rdb, cfg, pub))
	}
	return q
}

// nodeTimeout bounds one node's part of an attempt: a fraction of the lease,
// so that a slow node cannot eat the validity of a grant (Redlock).
func (q *quorum) nodeTimeout(lease time.Duration) time.Duration {
	if q.timeout > 0 {
		return q.timeout
	}
	return min(max(lease/20, 50*time.Millisecond), time.Second)
}

// each runs f on every node in parallel, each with the node timeout, and
// returns what each answered.
func each[T any](ctx context.Context, q *quorum, d time.Duration, f func(context.Context, *node) (T, error)) ([]T, []error) {
	vals, errs := make([]T, len(q.nodes)), make([]error, len(q.nodes))
	var wg sync.WaitGroup
	for i, n := range q.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			vals[i], errs[i] = f(nctx, n)
		})
	}
	wg.Wait()
	return vals, errs
}

func (q *quorum) pipelines() uint64 {
	var n uint64
	for _, x := range q.nodes {
		n += x.pipelines()
	}
	return n
}

// acquire takes the lock on every node in parallel. With a majority granted
// within the lease's validity (lease - elapsed - drift), it raises those
// nodes' fencing counters to the largest token among them and returns it;
// otherwise it gives back what it took and answers busy (with the shortest
// PTTL seen) or an error naming the count.
func (q *quorum) acquire(ctx context.Context, m *Mutex, h *hold) (int64, error) {
	lease, _ := m.leaseTime()
	d := q.nodeTimeout(lease)
	start := time.Now()
	vals, errs := each(ctx, q, d, func(c context.Context, n *node) (int64, error) { return n.acquire(c, m, h) })
	var granted []*node
	var token int64
	busy, pttl := 0, int64(-1)
	for i, v := range vals {
		switch {
		case errs[i] != nil:
		case v > 0:
			granted = append(granted, q.nodes[i])
			token = max(token, v)
		default:
			busy++
			if p := -1 - v; p >= 0 && (pttl < 0 || p < pttl) {
				pttl = p
			}
		}
	}
	if len(granted) >= q.need && time.Since(start) < lease-leaseMargin(lease) {
		raised, rerrs := each(ctx, q, d, func(c context.Context, n *node) (bool, error) {
			if !contains(granted, n) {
				return false, nil
			}
			return true, raiseScript.Run(c, n.rdb, m.keys[1:], token).Err()
		})
		ok := 0
		for i := range raised {
			if raised[i] && rerrs[i] == nil {
				ok++
			}
		}
		if ok >= q.need && time.Since(start) < lease-leaseMargin(lease) {
			return token, nil
		}
	}
	// No valid majority: give back every grant and every unknown outcome.
	each(context.WithoutCancel(ctx), q, d, func(c context.Context, n *node) (int64, error) { return n.release(c, h) })
	if err := q.permanent(errs); err != nil {
		return 0, err
	}
	if busy > 0 { // contention (or votes split with a rival): wait and try again
		return -1 - max(pttl, 0), nil
	}
	return 0, noQuorum("lock", len(granted), len(q.nodes), q.need, errs)
}

func contains(ns []*node, n *node) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

// permanent returns an error that no retry can fix if one node answered
// with one (foreign data, no scripting, NOPERM): it is the same everywhere.
func (q *quorum) permanent(errs []error) error {
	for _, err := range errs {
		if _, ok := foreignKind(err); ok {
			return err
		}
	}
	for _, err := range errs {
		if err != nil && !isTransient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return nil
}

// noQuorum reports that too few nodes answered for op.
func noQuorum(op string, ok, n, need int, errs []error) error {
	var why []string
	for i, err := range errs {
		if err != nil {
			why = append(why, fmt.Sprintf("node %d: %v", i, err))
		}
	}
	return fmt.Errorf("%w: %s confirmed by %d of %d servers, %d needed (%s)",
		ErrNoQuorum, op, ok, n, need, strings.Join(why, "; "))
}

// combine reads the statuses of one key from every node: 1 when a majority
// confirmed it; the most common definite answer when a majority can no
// longer confirm; else an error (too many nodes did not answer).
func (q *quorum) combine(op string, sts []int64, errs []error) (int64, error) {
	ok, answered := 0, 0
	worst := int64(0)
	for i, st := range sts {
		if errs[i] != nil {
			continue
		}
		answered++
		if st == 1 {
			ok++
		} else if st < worst || worst == 0 {
			worst = st
		}
	}
	switch {
	case ok >= q.need:
		return 1, nil
	case answered-ok > len(q.nodes)-q.need:
		return worst, nil
	default:
		if err := q.permanent(errs); err != nil {
			return 0, err
		}
		return 0, noQuorum(op, ok, len(q.nodes), q.need, errs)
	}
}

func (q *quorum) release(ctx context.Context, h *hold) (int64, error) {
	sts, errs := each(ctx, q, q.nodeTimeout(h.ent.lease), func(c context.Context, n *node) (int64, error) { return n.release(c, h) })
	return q.combine("release", sts, errs)
}

func (q *quorum) renewOne(ctx context.Context, key, token string, lease time.Duration) (int64, error) {
	sts, errs := each(ctx, q, q.nodeTimeout(lease), func(c context.Context, n *node) (int64, error) {
		return n.renewOne(c, key, token, lease)
	})
	return q.combine("renewal", sts, errs)
}

// pass runs the pass on every node in parallel and combines each entry's
// answers: a renewal counts when a majority confirmed it; a background
// release is done when no node failed to answer it.
func (q *quorum) pass(ctx context.Context, batch []*entry) []result {
	// A dead server must not hold the pass up past the holds' deadlines: its
	// part is cut at a few node timeouts (or half a renew interval).
	d := max(4*q.nodeTimeout(q.cfg.watchdogTimeout), q.cfg.renewInterval/2)
	all, _ := each(ctx, q, d, func(c context.Context, n *node) ([]result, error) { return n.pass(c, batch), nil })
	out := make([]result, len(batch))
	for i, e := range batch {
		sts, errs := make([]int64, len(q.nodes)), make([]error, len(q.nodes))
		for j := range q.nodes {
			sts[j], errs[j] = all[j][i].status, all[j][i].err
		}
		if e.kind == kindOrphan {
			out[i] = result{status: 1, err: errors.Join(errs...)}
			continue
		}
		out[i].status, out[i].err = q.combine("renewal", sts, errs)
	}
	return out
}

// inspect reports the lock as held when a majority holds it, with the
// shortest of their TTLs, and the largest fencing counter.
func (q *quorum) inspect(ctx context.Context, m *Mutex) (string, int64, int64, error) {
	type st struct {
		kind       string
		pttl, last int64
	}
	vals, errs := each(ctx, q, q.nodeTimeout(m.c.cfg.watchdogTimeout), func(c context.Context, n *node) (st, error) {
		k, p, l, err := n.inspect(c, m)
		return st{k, p, l}, err
	})
	held, answered := 0, 0
	pttl, last := int64(-2), int64(0)
	for i, v := range vals {
		if errs[i] != nil {
			continue
		}
		answered++
		last = max(last, v.last)
		switch v.kind {
		case "none":
		case "string":
			held++
			if pttl == -2 || (v.pttl >= 0 && (pttl < 0 || v.pttl < pttl)) {
				pttl = v.pttl
			}
		default:
			return v.kind, 0, last, nil
		}
	}
	switch {
	case held >= q.need:
		return "string", pttl, last, nil
	case answered-held > len(q.nodes)-q.need:
		return "none", 0, last, nil
	default:
		return "", 0, 0, noQuorum("inspect", answered, len(q.nodes), q.need, errs)
	}
}

func (q *quorum) forceUnlock(ctx context.Context, m *Mutex) (int64, string, error) {
	type st struct {
		status int64
		kind   string
	}
	vals, errs := each(ctx, q, q.nodeTimeout(m.c.cfg.watchdogTimeout), func(c context.Context, n *node) (st, error) {
		s, k, err := n.forceUnlock(c, m)
		return st{s, k}, err
	})
	deleted := false
	for i, v := range vals {
		if errs[i] != nil {
			continue
		}
		if v.status < 0 {
			return v.status, v.kind, nil
		}
		deleted = deleted || v.status == 1
	}
	if err := errors.Join(errs...); err != nil {
		return 0, "", fmt.Errorf("dlock: force unlock reached only some servers: %w", err)
	}
	if deleted {
		return 1, "string", nil
	}
	return 0, "none", nil
}
