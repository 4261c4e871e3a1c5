package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is returned by an acquire on a Client WithReplicaAck when
// fewer replicas than asked acknowledged the lock within the timeout: the
// grant was rolled back (deleted, token-checked) before the call returned.
var ErrNotReplicated = errors.New("dlock: lock not acknowledged by enough replicas")

// WithReplicaAck makes every acquire and every renewal wait until replicas
// replicas have acknowledged it (WAIT replicas timeout, sent on the same
// connection in the same pipeline, on the key's primary in a cluster). An
// acquire with fewer acknowledgements is rolled back and returns an error
// matching ErrNotReplicated that names the counts; a renewal with fewer
// counts as not confirmed (retried until the lease's deadline). It narrows,
// but does not close, the window in which a failover to a replica that never
// saw the lock lets a second holder in (WAIT is not consensus). Modelled on
// Redisson's checkLockSyncedSlaves, but off by default, and the caller
// chooses the count. replicas below 1 or a timeout not positive makes New
// fail.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		if replicas < 1 || timeout <= 0 {
			c.errs = append(c.errs, invalid("WithReplicaAck needs replicas >= 1 and a positive timeout, got %d, %v", replicas, timeout))
			return
		}
		c.ack = &replicaAck{replicas: replicas, timeout: timeout}
	}
}

// replicaAck is the WithReplicaAck setting.
type replicaAck struct {
	replicas int
	timeout  time.Duration
}

// notAcked reports an acknowledgement short of the count.
func (a *replicaAck) notAcked(got int64) error {
	return fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, got, a.replicas, a.timeout)
}

// conn returns the client whose connection must carry a command on key and
// its WAIT: the key's primary on a cluster, rdb itself otherwise.
func (n *node) conn(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := n.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return n.rdb, nil
}

// acked runs script on key's connection followed by WAIT in one pipeline, and
// returns the script's command and the number of replicas that acknowledged.
// On NOSCRIPT it sends the pair again with EVAL.
func (n *node) acked(ctx context.Context, s *redis.Script, src string, keys []string, args ...any) (*redis.Cmd, int64, error) {
	c, err := n.conn(ctx, keys[0])
	if err != nil {
		return nil, 0, err
	}
	run := func(eval bool) (*redis.Cmd, *redis.Cmd) {
		var cmd *redis.Cmd
		var wait *redis.Cmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if eval {
				cmd = p.Eval(ctx, src, keys, args...)
			} else {
				cmd = p.EvalSha(ctx, s.Hash(), keys, args...)
			}
			wait = p.Do(ctx, "wait", n.cfg.ack.replicas, n.cfg.ack.timeout.Milliseconds())
			return nil
		})
		return cmd, wait
	}
	cmd, wait := run(false)
	if isNoScript(cmd.Err()) {
		cmd, wait = run(true)
	}
	if cmd.Err() != nil {
		return cmd, 0, cmd.Err()
	}
	got, err := wait.Int64()
	return cmd, got, err
}
