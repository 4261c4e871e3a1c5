package dlock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Newer servers can release and renew a token-checked key without Lua:
//
//	Redis 8.4:  DELEX key IFEQ token          (1 deleted, 0 not)
//	Redis 8.4, Valkey 8.1:
//	            SET key token IFEQ token PX ms (OK extended, nil not ours;
//	                                            never creates a missing key)
//	Valkey 9.0: DELIFEQ key token              (1 deleted, 0 not)
//
// A node probes its server for them once, and again after a call failed to
// reach it (the next connection may reach another server: a failover, a
// restart on a new version), and uses what it found; the Lua scripts remain
// the path everywhere else, and the tested default.
// Version strings are never trusted (Valkey reports redis_version 7.2.4,
// miniredis claims 8.4 yet rejects SET IFEQ): only the commands' answers
// count. A native command that a server refuses turns the fast path off until
// the next probe, and that call goes by Lua. Acquire always runs acquire.lua:
// it hands out the fencing token. Fast paths apply to single-server and
// Sentinel clients; a Cluster keeps the scripts.
type caps struct {
	delex, setIfeq, delifeq bool
}

// probeKey is a key no lock uses, in a prefix the README's ACL rule covers;
// the probes never write it (IFEQ never matches a missing key).
const probeKey = "dlock:fence:probe"

// fastPaths returns what the node's server supports, probing when there is no
// answer yet (see reroute); nil when fast paths do not apply.
func (n *node) fastPaths(ctx context.Context) *caps {
	if !n.sameNode || n.cfg.ack != nil {
		return nil
	}
	if c := n.caps.Load(); c != nil {
		return c
	}
	c, answered := probe(ctx, n.rdb)
	if answered {
		n.caps.Store(c)
	}
	return c
}

// probe asks the server whether it answers each native command as a server
// that has it would. SET ... IFEQ comes first, alone: a server without it
// (Redis before 8.4, Valkey before 8.1) has neither delete command either,
// and is asked nothing a least-privilege user may not run (SET on a key in
// dlock:fence:*), so the probe leaves no refusal in its ACL LOG. answered is
// false when the server could not be asked (the answer is then not kept, and
// this call goes by the scripts).
func probe(ctx context.Context, rdb redis.UniversalClient) (c *caps, answered bool) {
	c = &caps{}
	set := rdb.Do(ctx, "set", probeKey, "dlock-probe", "ifeq", "dlock-probe", "px", 1)
	if err := set.Err(); err != nil && !errors.Is(err, redis.Nil) && !isRedisError(err) {
		return c, false
	}
	c.setIfeq = answersNil(set)
	if !c.setIfeq {
		return c, true
	}
	var delex, delifeq *redis.Cmd
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		delex = p.Do(ctx, "delex", probeKey, "ifeq", "dlock-probe")
		delifeq = p.Do(ctx, "delifeq", probeKey, "dlock-probe")
		return nil
	})
	for _, cmd := range []*redis.Cmd{delex, delifeq} {
		if err := cmd.Err(); err != nil && !isRedisError(err) {
			return c, false
		}
	}
	c.delex, c.delifeq = answersInt(delex, 0), answersInt(delifeq, 0)
	return c, true
}

// answersInt reports whether cmd got the integer want (a supported command
// on a missing key); an error (unknown command, syntax error, NOPERM) or any
// other answer means no.
func answersInt(cmd *redis.Cmd, want int64) bool {
	v, err := cmd.Int64()
	return err == nil && v == want
}

// answersNil reports whether cmd got a nil reply and no error (SET ... IFEQ
// on a missing key); Redis 7 answers "ERR syntax error".
func answersNil(cmd *redis.Cmd) bool { return errors.Is(cmd.Err(), redis.Nil) }

// refusedNative reports an error that means the server does not support a
// native command after all: it stops the fast paths until the next probe.
func refusedNative(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "syntax error") ||
		strings.Contains(msg, "wrong number of arguments") || strings.HasPrefix(msg, "noperm")
}

// off turns the fast paths off until the next probe.
func (n *node) off() { n.caps.Store(&caps{}) }

// nativeRelease deletes h's key if it holds h's token with DELEX or DELIFEQ,
// and announces it in the same pipeline (a notice is a hint: one after a
// failed delete only wakes a waiter early). ok is false when the fast path
// does not apply; the caller then runs release.lua.
func (n *node) nativeRelease(ctx context.Context, h *hold) (st int64, err error, ok bool) {
	c := n.fastPaths(ctx)
	if c == nil || !(c.delex || c.delifeq) {
		return 0, nil, false
	}
	var del *redis.Cmd
	_, _ = n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if c.delex {
			del = p.Do(ctx, "delex", h.name, "ifeq", h.token)
		} else {
			del = p.Do(ctx, "delifeq", h.name, h.token)
		}
		if n.pub == "p" {
			p.Publish(ctx, h.relArgs[2].(string), h.name)
		}
		return nil
	})
	v, err := del.Int64()
	if refusedNative(err) {
		n.off()
		return 0, nil, false
	}
	return v, err, true
}

// nativeRenew extends key if it holds token with SET ... IFEQ: 1 extended,
// 0 not ours (missing or another token). ok is false when the fast path does
// not apply.
func (n *node) nativeRenew(ctx context.Context, key, token string, lease time.Duration) (st int64, err error, ok bool) {
	c := n.fastPaths(ctx)
	if c == nil || !c.setIfeq {
		return 0, nil, false
	}
	err = n.rdb.Do(ctx, renewArgs(key, token, lease)...).Err()
	switch {
	case err == nil:
		return 1, nil, true
	case errors.Is(err, redis.Nil):
		return 0, nil, true
	case refusedNative(err):
		n.off()
		return 0, nil, false
	default:
		return 0, err, true
	}
}

// renewArgs is the native renewal of key: SET key token IFEQ token PX ms.
func renewArgs(key, token string, lease time.Duration) []any {
	return []any{"set", key, token, "ifeq", token, "px", leaseArg(lease)}
}

// allPlain reports whether every entry of a pass is a Mutex's key, which the
// native commands can renew and release.
func allPlain(batch []*entry) bool {
	for _, e := range batch {
		if e.own != nil {
			return false
		}
	}
	return true
}

// capsCell holds a node's last probe answer.
type capsCell = atomic.Pointer[caps]

// nativePass is a watchdog pass with SET ... IFEQ for every renewal (one
// pipeline); background releases go by EVAL of release.lua. ok is false when
// the server refused the native command: the pass then goes by the scripts.
func (n *node) nativePass(ctx context.Context, batch []*entry) ([]result, bool) {
	cmds := make([]*redis.Cmd, len(batch))
	n.pipelined.Add(1)
	_, _ = n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range batch {
			if e.kind == kindOrphan {
				cmds[i] = p.Eval(ctx, releaseSource, []string{e.key}, e.token, n.pub, noticeChannel(e.key))
			} else {
				cmds[i] = p.Do(ctx, renewArgs(e.key, e.token, e.lease)...)
			}
		}
		return nil
	})
	res := make([]result, len(batch))
	for i, e := range batch {
		err := cmds[i].Err()
		switch {
		case e.kind == kindOrphan:
			res[i].status, res[i].err = cmds[i].Int64()
		case err == nil:
			res[i].status = 1
		case errors.Is(err, redis.Nil):
			res[i].status = 0
		case refusedNative(err):
			n.off()
			return nil, false
		default:
			res[i].err = err
		}
	}
	return res, true
}
