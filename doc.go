// Package dlock provides distributed locks on Redis, modelled on Redisson's
// RLock: a [Client] hands out [Mutex] handles; a watchdog owned by the Client
// renews held locks until they are unlocked or their context ends, and tells
// the holder at once ([Mutex.Done], [Mutex.Err]) when a lease can no longer be
// confirmed; every grant carries a strictly increasing fencing token
// ([Mutex.FencingToken]) so storage can reject a late writer.
//
// [Client.WithLock] is the simplest correct use. A lease lock is safe only
// while its holder runs within the lease; see the README for what it cannot
// guarantee, and use the fencing token where correctness matters.
package dlock
