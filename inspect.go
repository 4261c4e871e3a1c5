package dlock

import (
	"context"
	"fmt"
	"time"
)

// NoExpiry is what TTL reports for a lock key without an expiry, which dlock
// never writes: someone removed its lease by hand.
const NoExpiry time.Duration = -1

// Status is a lock's state in Redis, as Inspect reads it.
type Status struct {
	// Locked reports whether any client holds the lock.
	Locked bool
	// TTL is the time left on the holder's lease: 0 when free, NoExpiry when
	// the key has no expiry.
	TTL time.Duration
	// LastFencingToken is the last fencing token handed out for any name of
	// the lock's hash slot (counters are shared per slot): an upper bound of
	// the lock's own last token, and the floor of its next one. 0 if none yet.
	LastFencingToken int64
}

// Inspect reads the lock's state in one round trip without changing it. It
// fails with an error matching ErrWrongType when the key holds another type.
func (m *Mutex) Inspect(ctx context.Context) (Status, error) {
	if err := m.check(ctx); err != nil {
		return Status{}, err
	}
	kind, pttl, last, err := m.c.st.inspect(ctx, m)
	if err != nil {
		return Status{}, redisErr("inspect", m.name, err)
	}
	held := "string"
	if m.own == redissonLock {
		held = "hash" // Redisson's layout
	}
	switch kind {
	case "none":
		pttl = 0
	case held:
	default:
		return Status{}, wrongType(m.name, kind)
	}
	s := Status{Locked: kind == held, TTL: time.Duration(pttl) * time.Millisecond}
	if pttl == -1 {
		s.TTL = NoExpiry
	}
	s.LastFencingToken = last
	return s, nil
}

// IsLocked reports whether any client, this one or another, holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	s, err := m.Inspect(ctx)
	return s.Locked, err
}

// TTL returns the time left on the lease of whoever holds the lock: 0 when
// the lock is free, NoExpiry when its key has no expiry.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	s, err := m.Inspect(ctx)
	return s.TTL, err
}

// ForceUnlock deletes the lock whoever holds it, an operator's override, and
// reports whether there was a lock to delete. The holder learns of it at its
// next renewal (at once, if it is this handle). It never deletes a key that
// holds data dlock did not write: that fails with an error matching
// ErrWrongType and leaves the key alone.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	status, kind, err := m.c.st.forceUnlock(ctx, m)
	if err != nil {
		return false, redisErr("force unlock", m.name, err)
	}
	switch status {
	case 0:
		return false, nil
	case 1:
		if h := m.current(); h != nil {
			m.c.w.loseHold(h, "ForceUnlock deleted its key")
		}
		m.c.log.Info("dlock: lock force-unlocked", "name", m.name)
		return true, nil
	default:
		return false, fmt.Errorf("dlock: force unlock: %w", wrongType(m.name, kind))
	}
}
