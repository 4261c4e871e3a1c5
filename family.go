package dlock

import (
	"context"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/slot"
	"github.com/redis/go-redis/v9"
)

// The synchronizers beyond Mutex (RWMutex, FairMutex, Semaphore,
// ExpirableSemaphore, CountDownLatch, MultiMutex) share the Client's
// watchdog, notifier and scripts machinery. Their keys are derived from the
// object's name so that they share its hash slot: derivedKey(kind, name) is
// "dlock:<kind>:{T}:<name>" with T the slot's fencing tag, so every script of
// one object runs on one slot of a cluster, whatever the name.

// derivedKey returns the key of an object's part kind ("readers", "queue",
// ...) in the hash slot of name.
func derivedKey(kind, name string) string {
	return "dlock:" + kind + ":{" + slot.Tag(slot.Of(name)) + "}:" + name
}

// ownerName returns the object's name for one of its keys: the name in a
// derived key "dlock:<kind>:{T}:<name>", else the key itself (a name). A
// background release announces it, so that the object's waiters wake.
func ownerName(key string) string {
	if rest, ok := strings.CutPrefix(key, "dlock:"); ok {
		if _, name, ok := strings.Cut(rest, "}:"); ok {
			return name
		}
	}
	return key
}

// single returns the Client's one-deployment store, or an error naming op
// for a Redlock Client, on which the synchronizers beyond Mutex are not
// offered (their state would need a quorum of its own).
func (c *Client) single(op, name string) (*node, error) {
	n, ok := c.st.(*node)
	if !ok {
		return nil, invalid("%s %s: not supported on a Redlock Client (NewRedlock); use New", op, quote(name))
	}
	return n, nil
}

// run runs script s on keys with args against the Client's one deployment:
// with WithReplicaAck, followed by WAIT on the same connection, failing with
// ErrNotReplicated when too few replicas acknowledged.
func (n *node) run(ctx context.Context, s *redis.Script, src string, keys []string, args ...any) (v any, err error) {
	defer func() { n.reroute(err) }()
	if n.cfg.ack == nil {
		return s.Run(ctx, n.rdb, keys, args...).Result()
	}
	cmd, got, err := n.acked(ctx, s, src, keys, args...)
	if err != nil {
		return nil, err
	}
	if got < int64(n.cfg.ack.replicas) {
		return cmd.Val(), n.cfg.ack.notAcked(got)
	}
	return cmd.Val(), nil
}

// newFamilyHold returns a hold of own on key for the object called name,
// bound to ctx, with a fresh token; its release announces name.
func (c *Client) newFamilyHold(ctx context.Context, own *ownership, name, key string) *hold {
	token := newToken()
	h := &hold{c: c, name: name, relKeys: []string{key}, token: token, lockCtx: ctx, own: own}
	h.relArgs, h.nargs = [4]any{token, c.pubArg, noticeChannel(key), name}, 4
	return h
}

// pttlHint turns a script's -1 - PTTL answer into a wait hint.
func pttlHint(v int64) time.Duration {
	if ms := -1 - v; ms >= 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return -1
}
