package dlock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is the store of one Redis deployment reached through one go-redis
// client: a server, Sentinel's primary, or a Cluster (every script's keys
// share a slot, so go-redis routes it to the right primary).
type node struct {
	rdb       redis.UniversalClient
	cfg       *config
	pub       any  // how releases are announced, boxed once: "p", "s" or ""
	sameNode  bool // every key lives on one server: batches may mix slots
	loaded    atomic.Bool
	pipelined atomic.Uint64
	caps      capsCell             // what the server answered the fast-path probe
	cluster   *redis.ClusterClient // rdb when it is a Cluster client: see reroute
}

func newNode(rdb redis.UniversalClient, cfg *config, pub string) *node {
	_, same := rdb.(*redis.Client)
	cluster, _ := rdb.(*redis.ClusterClient)
	return &node{rdb: rdb, cfg: cfg, pub: pub, sameNode: same, cluster: cluster}
}

func (n *node) pipelines() uint64 { return n.pipelined.Load() }

func (n *node) acquire(ctx context.Context, m *Mutex, h *hold) (_ int64, err error) {
	defer func() { n.reroute(err) }()
	s, src := acquireScript, acquireSource
	if m.own == redissonLock {
		s, src = redissonAcquireScript, redissonAcquireSource
	}
	if n.cfg.ack == nil {
		return s.Run(ctx, n.rdb, m.keys, h.args[:]...).Int64()
	}
	cmd, got, err := n.acked(ctx, s, src, m.keys, h.args[:]...)
	if err != nil {
		return 0, err
	}
	v, err := cmd.Int64()
	if err != nil || v <= 0 || got >= int64(n.cfg.ack.replicas) {
		return v, err
	}
	// Granted, but not replicated enough: give it back before answering.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.closeTimeout)
	defer cancel()
	_, _ = n.release(rctx, h)
	return 0, n.cfg.ack.notAcked(got)
}

func (n *node) release(ctx context.Context, h *hold) (_ int64, err error) {
	defer func() { n.reroute(err) }()
	if h.own != nil {
		return h.own.release.Run(ctx, n.rdb, h.relKeys, h.relArgs[:h.nargs]...).Int64()
	}
	if st, err, ok := n.nativeRelease(ctx, h); ok {
		return st, err
	}
	return releaseScript.Run(ctx, n.rdb, h.relKeys, h.relArgs[:h.nargs]...).Int64()
}

func (n *node) renewOne(ctx context.Context, key, token string, lease time.Duration) (_ int64, err error) {
	defer func() { n.reroute(err) }()
	if st, err, ok := n.nativeRenew(ctx, key, token, lease); ok {
		return st, err
	}
	var v any
	if n.cfg.ack == nil {
		v, err = renewScript.Run(ctx, n.rdb, []string{key}, leaseArg(lease), token).Result()
	} else {
		var cmd *redis.Cmd
		var got int64
		if cmd, got, err = n.acked(ctx, renewScript, renewSource, []string{key}, leaseArg(lease), token); err == nil {
			v = cmd.Val()
			if got < int64(n.cfg.ack.replicas) {
				return 0, n.cfg.ack.notAcked(got)
			}
		}
	}
	if err != nil {
		return 0, err
	}
	sts, err := int64s(v, 1)
	if err != nil {
		return 0, err
	}
	return sts[0], nil
}

func (n *node) inspect(ctx context.Context, m *Mutex) (_ string, _ int64, _ int64, err error) {
	defer func() { n.reroute(err) }()
	v, err := inspectScript.Run(ctx, n.rdb, m.keys).Slice()
	if err != nil {
		return "", 0, 0, err
	}
	if len(v) != 3 {
		return "", 0, 0, fmt.Errorf("dlock: unexpected reply from inspect script: %v", v)
	}
	kind, ok1 := v[0].(string)
	pttl, ok2 := v[1].(int64)
	last, ok3 := v[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return "", 0, 0, fmt.Errorf("dlock: unexpected reply from inspect script: %v", v)
	}
	fence, _ := strconv.ParseInt(last, 10, 64)
	return kind, pttl, fence, nil
}

func (n *node) forceUnlock(ctx context.Context, m *Mutex) (_ int64, _ string, err error) {
	defer func() { n.reroute(err) }()
	s := forceUnlockScript
	if m.own == redissonLock {
		s = redissonForceUnlockScript
	}
	v, err := s.Run(ctx, n.rdb, m.relKeys, n.pub, m.channel).Result()
	if err != nil {
		return 0, "", err
	}
	r, err := parseStatus("force_unlock", v)
	return r.status, r.kind, err
}

// pass executes one watchdog pass: every renewal entry is extended by the
// renew script in batches of at most the batch size (one slot per batch
// unless every key lives on one server), and every orphan entry is released
// by the release script. All scripts go out in one pipeline, one round trip
// per node. The first pass sends them by EVAL, which caches them; later
// passes by EVALSHA, and calls the server answers NOSCRIPT (a restarted or
// flushed server, a new cluster node) go out once more by EVAL: one more
// round trip, once per server, never on the first renewal of a hold.
func (n *node) pass(ctx context.Context, batch []*entry) (res []result) {
	defer func() {
		for _, r := range res {
			if r.err != nil && unreachable(r.err) {
				n.reroute(r.err)
				return
			}
		}
	}()
	if c := n.fastPaths(ctx); c != nil && c.setIfeq && allPlain(batch) {
		if res, ok := n.nativePass(ctx, batch); ok {
			return res
		}
	}
	res = make([]result, len(batch))
	calls := n.plan(batch)
	if !n.loaded.Load() {
		n.send(ctx, calls, batch, true)
		ok := true
		for _, c := range calls {
			ok = ok && c.cmd.Err() == nil
			c.collect(batch, res)
		}
		n.loaded.Store(ok)
		return res
	}
	n.send(ctx, calls, batch, false)
	var again []call
	for _, c := range calls {
		if isNoScript(c.cmd.Err()) {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		n.send(ctx, again, batch, true)
		for _, c := range again {
			c.collect(batch, res)
		}
	}
	for _, c := range calls {
		if !isNoScript(c.cmd.Err()) {
			c.collect(batch, res)
		}
	}
	return res
}

// send sends calls in one pipeline, by EVAL when eval is set. With
// WithReplicaAck, each primary's calls go in a pipeline of their own that
// ends with WAIT, and a short count fails every call in it.
func (n *node) send(ctx context.Context, calls []call, batch []*entry, eval bool) {
	if n.cfg.ack != nil {
		n.sendAcked(ctx, calls, batch, eval)
		return
	}
	n.pipelined.Add(1)
	_, _ = n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range calls {
			calls[i].send(ctx, p, batch, n.cfg.watchdogTimeout, n.pub, eval)
		}
		return nil
	})
}

func (n *node) sendAcked(ctx context.Context, calls []call, batch []*entry, eval bool) {
	groups := map[redis.Cmdable][]int{}
	var order []redis.Cmdable
	for i := range calls {
		c, err := n.conn(ctx, batch[calls[i].idx[0]].key)
		if err != nil {
			calls[i].cmd = redis.NewCmd(ctx)
			calls[i].cmd.SetErr(err)
			continue
		}
		if _, ok := groups[c]; !ok {
			order = append(order, c)
		}
		groups[c] = append(groups[c], i)
	}
	var wg sync.WaitGroup
	for _, c := range order {
		wg.Go(func() {
			n.pipelined.Add(1)
			var wait *redis.Cmd
			_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, i := range groups[c] {
					calls[i].send(ctx, p, batch, n.cfg.watchdogTimeout, n.pub, eval)
				}
				wait = p.Do(ctx, "wait", n.cfg.ack.replicas, n.cfg.ack.timeout.Milliseconds())
				return nil
			})
			if got, err := wait.Int64(); err == nil && got < int64(n.cfg.ack.replicas) {
				for _, i := range groups[c] {
					if calls[i].cmd.Err() == nil {
						calls[i].cmd.SetErr(n.cfg.ack.notAcked(got))
					}
				}
			}
		})
	}
	wg.Wait()
}

// A call is one script in a pass: a renew batch or one orphan's release.
type call struct {
	idx []int // positions in the pass
	cmd *redis.Cmd
}

// plan groups a pass into calls: renewals by hash slot unless every key lives
// on one server, cut at the batch size; each orphan on its own.
func (n *node) plan(batch []*entry) []call {
	type group struct {
		own  *ownership
		slot uint16
	}
	var calls []call
	open := map[group]int{} // group -> index in calls of its open batch
	for i, e := range batch {
		if e.kind == kindOrphan {
			calls = append(calls, call{idx: []int{i}})
			continue
		}
		g := group{own: e.own}
		if !n.sameNode {
			g.slot = e.slot
		}
		j, ok := open[g]
		if !ok || len(calls[j].idx) >= n.cfg.batchSize {
			j = len(calls)
			open[g] = j
			calls = append(calls, call{})
		}
		calls[j].idx = append(calls[j].idx, i)
	}
	return calls
}

func (c *call) send(ctx context.Context, p redis.Pipeliner, batch []*entry, lease time.Duration, pub any, eval bool) {
	first := batch[c.idx[0]]
	renew, release, renewSrc, releaseSrc := first.own.scripts()
	if first.kind == kindOrphan {
		keys, ch := []string{first.key}, noticeChannel(first.key)
		args := []any{first.token, pub, ch}
		if first.own != nil {
			args = append(args, ownerName(first.key))
		}
		if eval {
			c.cmd = p.Eval(ctx, releaseSrc, keys, args...)
		} else {
			c.cmd = p.EvalSha(ctx, release.Hash(), keys, args...)
		}
		return
	}
	keys := make([]string, len(c.idx))
	args := make([]any, len(c.idx)+1)
	args[0] = leaseArg(lease)
	for k, i := range c.idx {
		keys[k] = batch[i].key
		args[k+1] = batch[i].token
	}
	if eval {
		c.cmd = p.Eval(ctx, renewSrc, keys, args...)
	} else {
		c.cmd = p.EvalSha(ctx, renew.Hash(), keys, args...)
	}
}

func (c *call) collect(batch []*entry, res []result) {
	if err := c.cmd.Err(); err != nil {
		for _, i := range c.idx {
			res[i].err = err
		}
		return
	}
	if batch[c.idx[0]].kind == kindOrphan {
		st, err := c.cmd.Int64()
		res[c.idx[0]] = result{status: st, err: err}
		return
	}
	sts, err := int64s(c.cmd.Val(), len(c.idx))
	for k, i := range c.idx {
		if err != nil {
			res[i].err = err
		} else {
			res[i].status = sts[k]
		}
	}
}
