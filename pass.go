package dlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// run executes one watchdog pass: every renewal entry is extended by the
// renew script in batches of at most the batch size (one slot per batch
// unless every key lives on one server), and every orphan entry is released
// by the release script. All scripts go out in one pipeline, one round trip
// per node. The first pass sends them by EVAL, which caches them; later
// passes by EVALSHA, and calls the server answers NOSCRIPT (a restarted or
// flushed server, a new cluster node) go out once more by EVAL: one more
// round trip, once per server, never on the first renewal of a hold.
func (w *watchdog) run(ctx context.Context, batch []*entry) []result {
	res := make([]result, len(batch))
	calls := w.plan(batch)
	if !w.loaded.Load() {
		w.send(ctx, calls, batch, true)
		ok := true
		for _, c := range calls {
			ok = ok && c.cmd.Err() == nil
			c.collect(batch, res)
		}
		w.loaded.Store(ok)
		return res
	}
	w.send(ctx, calls, batch, false)
	var again []call
	for _, c := range calls {
		if isNoScript(c.cmd.Err()) {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		w.send(ctx, again, batch, true)
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

// send sends calls in one pipeline, by EVAL when eval is set.
func (w *watchdog) send(ctx context.Context, calls []call, batch []*entry, eval bool) {
	w.pipelines.Add(1)
	_, _ = w.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range calls {
			calls[i].send(ctx, p, batch, w.c.cfg.watchdogTimeout, w.c.pub, eval)
		}
		return nil
	})
}

// A call is one script in a pass: a renew batch or one orphan's release.
type call struct {
	idx []int // positions in the pass
	cmd *redis.Cmd
}

// plan groups a pass into calls: renewals by hash slot unless every key lives
// on one server, cut at the batch size; each orphan on its own.
func (w *watchdog) plan(batch []*entry) []call {
	var calls []call
	open := map[uint16]int{} // slot group -> index in calls of its open batch
	bySlot := !w.c.sameNode()
	for i, e := range batch {
		if e.kind == kindOrphan {
			calls = append(calls, call{idx: []int{i}})
			continue
		}
		g := uint16(0)
		if bySlot {
			g = e.slot
		}
		j, ok := open[g]
		if !ok || len(calls[j].idx) >= w.c.cfg.batchSize {
			j = len(calls)
			open[g] = j
			calls = append(calls, call{})
		}
		calls[j].idx = append(calls[j].idx, i)
	}
	return calls
}

func (c *call) send(ctx context.Context, p redis.Pipeliner, batch []*entry, lease time.Duration, pub string, eval bool) {
	first := batch[c.idx[0]]
	if first.kind == kindOrphan {
		keys := []string{first.key, noticeChannel(first.key)}
		if eval {
			c.cmd = p.Eval(ctx, releaseSource, keys, first.token, pub)
		} else {
			c.cmd = p.EvalSha(ctx, releaseScript.Hash(), keys, first.token, pub)
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
		c.cmd = p.Eval(ctx, renewSource, keys, args...)
	} else {
		c.cmd = p.EvalSha(ctx, renewScript.Hash(), keys, args...)
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
