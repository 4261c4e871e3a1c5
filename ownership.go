package dlock

import (
	"github.com/redis/go-redis/v9"
)

// An ownership is a kind of thing a hold owns in Redis, for the watchdog and
// Unlock: how a batch of them is renewed and how one is given back. The
// Mutex's is a string key holding the hold's token (nil stands for it); the
// read-write lock's readers and the expirable semaphore's permits are members
// of a sorted set with their expiry as score, and so on.
//
// Every ownership's scripts follow one contract, so the watchdog batches and
// answers them alike:
//
//	renew:   KEYS[i] a key, ARGV[1] the lease in ms, ARGV[i+1] the token
//	         in KEYS[i]; returns one status per key: 1 extended, 0 gone,
//	         -1 another owner, -2 another Redis type.
//	release: KEYS[1] the key, ARGV[1] the token, ARGV[2] how to announce
//	         ('p', 's' or ''), ARGV[3] the notice channel, ARGV[4] the notice
//	         (the object's name); returns 1 released, 0 gone, -1 another
//	         owner, -2 another Redis type.
type ownership struct {
	name                 string // for messages: "lock", "read lock", "permit"
	renew, release       *redis.Script
	renewSrc, releaseSrc string // sent by EVAL when a server answers NOSCRIPT
}

// newOwnership loads the named renew and release scripts from scripts/.
func newOwnership(name, renew, release string) *ownership {
	return &ownership{name: name,
		renew: loadScript(renew), renewSrc: scriptSource(renew),
		release: loadScript(release), releaseSrc: scriptSource(release)}
}

// scripts returns the renew and release scripts of o; nil is the Mutex's.
func (o *ownership) scripts() (renew, release *redis.Script, renewSrc, releaseSrc string) {
	if o == nil {
		return renewScript, releaseScript, renewSource, releaseSource
	}
	return o.renew, o.release, o.renewSrc, o.releaseSrc
}

// memberOwnership is owning a member of a sorted set whose score is the
// member's expiry in server milliseconds: a read lock's reader, a permit of
// an expirable semaphore.
var memberOwnership = newOwnership("member", "member_renew", "member_release")
