package main

import (
	"context"
	"fmt"
	"strings"
)

// A lib is one instance of a lock library, a "Client" in the report: its own
// connection pool to the server, built with the library's default options.
type lib interface {
	// mutex returns a handle on the lock called name. A handle is used by one
	// goroutine at a time and reused for every cycle, so that the measured
	// path holds no allocation of the adapter's own.
	mutex(name string) mutex
	// ping makes one PING round trip through the same connection pool.
	ping(ctx context.Context) error
	// close ends the instance: its goroutines and its connections.
	close() error
}

// A mutex is a handle on one lock name; it remembers its current hold.
type mutex interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// A refresher is a mutex whose holder extends the lease by hand.
type refresher interface {
	refresh(ctx context.Context) error
}

// A holder is a mutex that can tell, without a round trip, whether its
// hold is still alive.
type holder interface {
	held() bool
}

// renewal is how a library keeps held locks alive.
type renewal int

const (
	// renewWatchdog: one scheduler renews every due lock in batched passes.
	renewWatchdog renewal = iota
	// renewByHand: no watchdog; the holder calls an extend per lock.
	renewByHand
	// renewPerLock: a goroutine and a timer per lock extend it on its own.
	renewPerLock
)

// A libSpec names a library and opens instances of it. With watchdog set it
// configures the renewal that the watchdog scenario measures.
type libSpec struct {
	name    string
	renewal renewal
	open    func(addr string, watchdog bool) (lib, error)
	family  bool // a dlock synchronizer beyond Mutex: not a peer, no watchdog scenario
	shared  bool // holders do not exclude each other (read locks): no contended scenario
}

// libSpecs are the libraries this benchmark knows, in report order.
var libSpecs = []libSpec{
	{name: "dlock", renewal: renewWatchdog, open: openDlock},
	{name: "redsync", renewal: renewByHand, open: openRedsync},
	{name: "redislock", renewal: renewByHand, open: openRedislock},
	{name: "rueidislock", renewal: renewPerLock, open: openRueidislock},
	{name: "dlock-rw-write", renewal: renewWatchdog, open: openDlockRW, family: true},
	{name: "dlock-rw-read", renewal: renewWatchdog, open: openDlockRead, family: true, shared: true},
	{name: "dlock-semaphore", renewal: renewWatchdog, open: openDlockSem, family: true},
}

// isFamily reports whether the library called name is a dlock synchronizer
// beyond Mutex.
func isFamily(name string) bool {
	for _, s := range libSpecs {
		if s.name == name {
			return s.family
		}
	}
	return false
}

// selectLibs returns the specs named in the comma-separated list, in the
// order of libSpecs.
func selectLibs(list string) ([]libSpec, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		known := false
		for _, s := range libSpecs {
			known = known || s.name == n
		}
		if !known {
			return nil, fmt.Errorf("-libs: unknown library %q (known: dlock, redsync, redislock, rueidislock, dlock-rw-write, dlock-rw-read, dlock-semaphore)", n)
		}
		want[n] = true
	}
	var out []libSpec
	for _, s := range libSpecs {
		if want[s.name] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-libs: no library selected")
	}
	return out, nil
}
