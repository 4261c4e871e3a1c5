package dlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// WithRedissonCompat makes the Client keep its locks exactly as Redisson 3.x
// does, so that Go and Java services exclude each other on the same names
// while a fleet moves from one to the other. clientID stands for Redisson's
// connection-manager id (a UUID): every owner field this Client writes is
// "<clientID>:<ownerID>", where ownerID is "go-<n>", stable for a handle's
// life and unique within the Client; a Java thread id is a number, so the
// two can never collide. Give each Client its own clientID (uuid.NewString()),
// never one a Java client uses. An empty clientID, or one that another open
// Client of this process uses, makes New fail with ErrInvalidArgument; NewRedlock refuses the option (Redisson's RedLock keeps
// plain locks on each server, not a quorum of our own).
//
// With the option, Mutex uses Redisson's RLock layout (the hash at the name,
// field <clientID>:<ownerID> holding the hold count, PTTL as the busy answer,
// unlock by hold count with the message "0" on redisson_lock__channel:{name})
// and RFencedLock's counter redisson_lock_token:{name} for fencing tokens;
// Semaphore and CountDownLatch use Redisson's channels and messages. See the
// README's migration guide for what each type stores and the limits.
func WithRedissonCompat(clientID string) Option {
	return func(c *config) {
		if clientID == "" {
			c.errs = append(c.errs, invalid("WithRedissonCompat needs a client id (a UUID), got an empty one"))
			return
		}
		c.redissonID = clientID
	}
}

// redissonIDs are the client ids of the open Clients WithRedissonCompat of
// this process: two Clients with one id would hand out the same owner fields
// (each counts its handles from 1) and take each other's locks as reentries.
var redissonIDs sync.Map

func claimRedissonID(id string) bool {
	_, taken := redissonIDs.LoadOrStore(id, struct{}{})
	return !taken
}

func releaseRedissonID(id string) { redissonIDs.Delete(id) }

// redisson reports whether the Client keeps Redisson's layout.
func (c *Client) redisson() bool { return c.cfg.redissonID != "" }

// newOwnerField returns a fresh owner field "<clientID>:go-<n>" for a handle
// of a Client WithRedissonCompat.
func (c *Client) newOwnerField() string {
	return c.cfg.redissonID + ":go-" + strconv.FormatUint(c.owners.Add(1), 10)
}

// redissonName is Redisson's prefixName: "<prefix>:{<name>}", or
// "<prefix>:<name>" when the name already has a brace, so that the derived
// key shares the name's hash slot either way.
func redissonName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// The RLock layout's scripts: a Mutex of a Client WithRedissonCompat owns a
// field of the hash at its name (redissonLock), acquires with
// redisson_acquire.lua and force-unlocks with redisson_force_unlock.lua.
var (
	redissonLock              = newOwnership("redisson lock", "redisson_renew", "redisson_release")
	redissonAcquireScript     = loadScript("redisson_acquire")
	redissonAcquireSource     = scriptSource("redisson_acquire")
	redissonForceUnlockScript = loadScript("redisson_force_unlock")
)

// redissonCountDown takes one count off a reentrant hold in Redisson's hash,
// as Redisson's unlock does while the count stays above zero. A hold whose
// field is gone is lost.
func (c *Client) redissonCountDown(ctx context.Context, h *hold) error {
	st, err := redissonLock.release.Run(ctx, c.rdb, h.relKeys, h.token, c.pubArg, "", "", leaseArg(h.ent.lease)).Int64()
	switch {
	case err != nil:
		return redisErr("unlock (reentrant)", h.name, err)
	case st == 2:
		return nil
	case st == 1: // the count was 1 in Redis: the hold is over
		c.w.loseHold(h, "its hold count in Redis was lower than the handle's")
	default:
		c.w.loseHold(h, lossReason(st))
	}
	return fmt.Errorf("dlock: unlock %s (reentrant): %w", quote(h.name), h.why())
}
