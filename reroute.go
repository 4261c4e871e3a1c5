package dlock

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// reroute asks a Cluster client to reload its slot map when err says that a
// node could not be reached or that the cluster is down. go-redis reloads the
// map by itself only on MOVED, ASK and READONLY replies, and otherwise once
// per ClusterStateReloadInterval (a minute by default): after a primary dies,
// a ClusterClient would keep sending that primary's slots to the dead address
// long after its replica took over, and every lock there would fail to be
// taken or renewed meanwhile. The reload runs in go-redis's background and
// coalesces with one already under way, so calling it on every such error
// costs nothing more.
//
// It also forgets the fast-path probe's answer (see fastPaths): the next
// connection may reach another server, which is probed before its first use.
func (n *node) reroute(err error) {
	if err == nil || !unreachable(err) {
		return
	}
	if n.caps.Load() != nil {
		n.caps.Store(nil)
	}
	if n.cluster != nil {
		n.cluster.ReloadState(context.Background())
	}
}

// unreachable reports whether err is a failure to reach a node (a network
// error, a timeout, a full pool) or a cluster that reports itself down, as
// opposed to a reply to the command or the caller giving up.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, redis.ErrClosed) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return strings.HasPrefix(rerr.Error(), "CLUSTERDOWN")
	}
	return true
}
