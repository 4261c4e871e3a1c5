package dlock_test

// Hostile and odd input, as fuzz targets against a real redis-server. Each
// target starts one server (each fuzzing worker process starts its own) and
// empties it before every input, so an input's outcome depends on the input
// alone and a failing one in testdata/fuzz replays the same way.
//
//	go test -run XXX -fuzz FuzzLockName -fuzztime 60s -fuzzminimizetime 5s .
//
// (A short minimize time keeps the fuzzer from spending a minute shrinking
// the 1 MiB name.) The fuzzer keeps new inputs in $GOCACHE/fuzz; the ones
// worth keeping are copied to testdata/fuzz/<target>, which plain go test
// runs with the f.Add seeds.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/slot"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// inputTimeout bounds everything one fuzz input does against Redis.
const inputTimeout = 2 * time.Second

// freshInput empties the server and returns a context that bounds the input.
func freshInput(t *testing.T, admin *redis.Client) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), inputTimeout)
	t.Cleanup(cancel)
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	return ctx
}

// newFuzzClient returns a dlock Client on rdb, closed when the input ends.
func newFuzzClient(t *testing.T, rdb *redis.Client, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(rdb, opts...)
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// counterOf is the fencing counter of name's hash slot, as the README
// documents the storage format: dlock:fence:{T}, T the slot's fixed tag.
func counterOf(name string) string {
	return "dlock:fence:{" + slot.Tag(slot.Of(name)) + "}"
}

// tokenShaped reports whether v looks like a dlock token to the scripts: 36
// characters shaped like a UUID, hex digits of either case.
func tokenShaped(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i := range len(v) {
		c := v[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// keyState is what a key holds: its type, its serialized value (DUMP) and its
// absolute expiry in ms (-1 none, -2 no key).
type keyState struct {
	kind     string
	dump     string
	expireAt int64
}

func stateOf(t *testing.T, ctx context.Context, admin *redis.Client, key string) keyState {
	t.Helper()
	var s keyState
	var err error
	if s.kind, err = admin.Type(ctx, key).Result(); err != nil {
		t.Fatalf("TYPE: %v", err)
	}
	if s.dump, err = admin.Dump(ctx, key).Result(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("DUMP: %v", err)
	}
	if s.expireAt, err = admin.Do(ctx, "PEXPIRETIME", key).Int64(); err != nil {
		t.Fatalf("PEXPIRETIME: %v", err)
	}
	return s
}

// keyspace returns the state of every key on the server.
func keyspace(t *testing.T, ctx context.Context, admin *redis.Client) map[string]keyState {
	t.Helper()
	out := map[string]keyState{}
	it := admin.Scan(ctx, 0, "", 1000).Iterator()
	for it.Next(ctx) {
		out[it.Val()] = stateOf(t, ctx, admin, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return out
}

func exists(t *testing.T, ctx context.Context, admin *redis.Client, key string) bool {
	t.Helper()
	n, err := admin.Exists(ctx, key).Result()
	if err != nil {
		t.Fatalf("EXISTS: %v", err)
	}
	return n == 1
}

// FuzzLockName shows that any lock name works or fails clearly: TryLock,
// IsLocked, TTL, Inspect, Unlock and ForceUnlock never panic or hang, a lock
// of any non-empty name is granted with a token and a fencing token, and is
// gone after Unlock; an empty name, or one in the prefix dlock:fence: that
// dlock reserves for its fencing counters, fails with ErrInvalidArgument. No
// key but the lock's own and its slot's fencing counter is ever created or
// changed.
func FuzzLockName(f *testing.F) {
	for _, name := range []string{
		"", "a", strings.Repeat("n", 1<<20), "\x00\xff\xfe", "{", "}", "{}", "a{}b",
		"{user}:lock", "{{x}}", "ünïcødé🔒", "lock:order:1001",
		"with space", "line\nbreak", "\r\n", "*", "lock:*", "?", "[a-z]", "\\*",
		"dlock:fence:{0}", "dlock:fence:{1}", "dlock:fence:{zz}", "dlock:fence:", "dlock:notice:{0}",
		"fuzz:sentinel",
	} {
		f.Add(name)
	}
	srv := testserver.StartRedis(f)
	rdb, admin := srv.Client(), srv.Admin() // dlock gets the least-privilege user; the test looks with every right
	f.Fuzz(func(t *testing.T, name string) {
		ctx := freshInput(t, admin)
		c := newFuzzClient(t, rdb)
		sentinel := "fuzz:sentinel"
		if name == sentinel {
			sentinel += ":other"
		}
		if err := admin.Set(ctx, sentinel, "untouched", 0).Err(); err != nil {
			t.Fatal(err)
		}
		before := keyspace(t, ctx, admin)

		m := c.NewMutex(name)
		switch {
		case name == "" || strings.HasPrefix(name, "dlock:fence:"):
			checkInvalidName(t, ctx, c, m)
		default:
			checkPlainName(t, ctx, admin, m)
		}

		counter := counterOf(name)
		after := keyspace(t, ctx, admin)
		if _, ok := after[name]; ok && name != counter {
			t.Errorf("key %.40q left behind", name)
		}
		for k, s := range after {
			if k != counter && k != name && before[k] != s {
				t.Errorf("key %.40q was created or changed: %+v -> %+v", k, before[k], s)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok && k != counter {
				t.Errorf("key %.40q was deleted", k)
			}
		}
	})
}

// checkInvalidName: every call on a handle with an empty or reserved name
// fails with ErrInvalidArgument, without I/O.
func checkInvalidName(t *testing.T, ctx context.Context, c *dlock.Client, m *dlock.Mutex) {
	t.Helper()
	check := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s with name %.40q = %v, want ErrInvalidArgument", call, m.Name(), err)
		}
	}
	ok, err := m.TryLock(ctx, 0)
	check("TryLock", err)
	if ok {
		t.Error("TryLock with an invalid name acquired")
	}
	check("Lock", m.Lock(ctx))
	_, err = m.IsLocked(ctx)
	check("IsLocked", err)
	_, err = m.TTL(ctx)
	check("TTL", err)
	_, err = m.Inspect(ctx)
	check("Inspect", err)
	_, err = m.ForceUnlock(ctx)
	check("ForceUnlock", err)
	check("Unlock", m.Unlock(ctx))
	check("WithLock", c.WithLock(ctx, m.Name(), func(context.Context, int64) error {
		t.Error("WithLock ran its function for an invalid name")
		return nil
	}))
}

// checkPlainName: the lock is granted, seen by every read, released by
// Unlock, and deleted (the holder told at once) by ForceUnlock.
func checkPlainName(t *testing.T, ctx context.Context, admin *redis.Client, m *dlock.Mutex) {
	t.Helper()
	name := m.Name()
	if ok, err := m.TryLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryLock(%.40q) = %v, %v; want acquired", name, ok, err)
	}
	if v := admin.Get(ctx, name).Val(); !tokenShaped(v) {
		t.Fatalf("key %.40q holds %.60q, want a token", name, v)
	}
	fence := m.FencingToken()
	if fence <= 0 || !m.IsHeld() {
		t.Fatalf("after TryLock: FencingToken = %d, IsHeld = %v", fence, m.IsHeld())
	}
	st, err := m.Inspect(ctx)
	if err != nil || !st.Locked || st.TTL <= 0 || st.TTL > dlock.DefaultWatchdogTimeout || st.LastFencingToken != fence {
		t.Fatalf("Inspect of a held lock = %+v, %v; want locked, TTL in (0, %v], last token %d",
			st, err, dlock.DefaultWatchdogTimeout, fence)
	}
	if locked, err := m.IsLocked(ctx); !locked || err != nil {
		t.Fatalf("IsLocked of a held lock = %v, %v", locked, err)
	}
	if ttl, err := m.TTL(ctx); ttl <= 0 || err != nil {
		t.Fatalf("TTL of a held lock = %v, %v", ttl, err)
	}

	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if exists(t, ctx, admin, name) {
		t.Fatalf("key %.40q still exists after Unlock", name)
	}
	if st, err := m.Inspect(ctx); err != nil || st != (dlock.Status{LastFencingToken: fence}) {
		t.Fatalf("Inspect of a released lock = %+v, %v", st, err)
	}
	if locked, err := m.IsLocked(ctx); locked || err != nil {
		t.Fatalf("IsLocked of a released lock = %v, %v", locked, err)
	}
	if ttl, err := m.TTL(ctx); ttl != 0 || err != nil {
		t.Fatalf("TTL of a released lock = %v, %v", ttl, err)
	}
	if ok, err := m.ForceUnlock(ctx); ok || err != nil {
		t.Fatalf("ForceUnlock of a free lock = %v, %v", ok, err)
	}

	if ok, err := m.TryLock(ctx, 0); !ok || err != nil {
		t.Fatalf("second TryLock = %v, %v", ok, err)
	}
	if next := m.FencingToken(); next <= fence {
		t.Fatalf("second fencing token %d, not above %d", next, fence)
	}
	if ok, err := m.ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock of a held lock = %v, %v", ok, err)
	}
	if exists(t, ctx, admin, name) {
		t.Fatalf("key %.40q still exists after ForceUnlock", name)
	}
	if m.IsHeld() || !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("after its own ForceUnlock: IsHeld = %v, Err = %v; want lost", m.IsHeld(), m.Err())
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after ForceUnlock = %v, want ErrLockLost", err)
	}
}

// Kinds of foreign data FuzzForeignKey puts at the lock's key.
const (
	foreignHash = iota
	foreignList
	foreignSet
	foreignZSet
	foreignString    // no TTL
	foreignStringTTL // with a TTL
	foreignUUIDNoTTL // shaped like a token, without TTL: a lock whose lease was removed by hand
	foreignKinds
)

// FuzzForeignKey shows that data dlock did not write is reported and never
// touched: with a hash, list, set, sorted set or non-token string at the
// lock's key, Lock, TryLock, Inspect, IsLocked, TTL, ForceUnlock and WithLock
// fail at once with ErrWrongType naming the key, and the key keeps its type,
// value and TTL. A string shaped like a token (the UUID kind, or a fuzzed
// string that happens to be one) is indistinguishable from a lock: it counts
// as held (TryLock waits its wait and returns false, Inspect reports it with
// its TTL, NoExpiry without one), Lock waits until its context ends, and
// ForceUnlock deletes it.
func FuzzForeignKey(f *testing.F) {
	for kind := range uint8(foreignKinds) {
		f.Add(kind, "payload", int64(0))
		f.Add(kind, "", int64(60_000))
	}
	f.Add(uint8(foreignString), "0f8e6a52-3c1d-4b7e-9a2f-5d6c7b8a9e0f", int64(0))    // a token, no TTL
	f.Add(uint8(foreignStringTTL), "0F8E6A52-3C1D-4B7E-9A2F-5D6C7B8A9E0F", int64(0)) // upper case, with TTL
	f.Add(uint8(foreignString), "0f8e6a52-3c1d-4b7e-9a2f-5d6c7b8a9e0g", int64(0))    // 36 chars, not hex
	f.Add(uint8(foreignString), "0f8e6a52+3c1d-4b7e-9a2f-5d6c7b8a9e0f", int64(0))    // 36 chars, no dash
	f.Add(uint8(foreignString), "12345", int64(-1))                                  // a number
	f.Add(uint8(foreignStringTTL), "\x00\xff", int64(math.MinInt64))
	f.Add(uint8(foreignHash), strings.Repeat("v", 1<<16), int64(math.MaxInt64))
	srv := testserver.StartRedis(f)
	rdb, admin := srv.Client(), srv.Admin() // dlock gets the least-privilege user; the test looks with every right
	const name = "fuzz:foreign"
	f.Fuzz(func(t *testing.T, kind uint8, value string, ttlMs int64) {
		ctx := freshInput(t, admin)
		c := newFuzzClient(t, rdb)
		kind %= foreignKinds
		ttl := time.Duration(2000+uint64(ttlMs)%86_400_000) * time.Millisecond // 2s .. 1 day
		if kind == foreignString || kind == foreignUUIDNoTTL || kind != foreignStringTTL && ttlMs <= 0 {
			ttl = 0
		}
		stored := writeForeign(t, ctx, admin, name, kind, value, ttl)
		before := stateOf(t, ctx, admin, name)
		m := c.NewMutex(name)

		if stored != nil && tokenShaped(*stored) {
			checkTokenShaped(t, ctx, admin, m, ttl, before)
			return
		}
		start := time.Now()
		wrong := func(call string, err error) {
			t.Helper()
			if !errors.Is(err, dlock.ErrWrongType) || !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Errorf("%s over a %s = %v, want ErrWrongType naming %q", call, before.kind, err, name)
			}
		}
		wrong("Lock", m.Lock(ctx))
		ok, err := m.TryLock(ctx, 100*time.Millisecond)
		wrong("TryLock", err)
		if ok {
			t.Error("TryLock acquired over foreign data")
		}
		_, err = m.Inspect(ctx)
		wrong("Inspect", err)
		_, err = m.IsLocked(ctx)
		wrong("IsLocked", err)
		_, err = m.TTL(ctx)
		wrong("TTL", err)
		ok, err = m.ForceUnlock(ctx)
		wrong("ForceUnlock", err)
		if ok {
			t.Error("ForceUnlock deleted foreign data")
		}
		wrong("WithLock", c.WithLock(ctx, name, func(context.Context, int64) error {
			t.Error("WithLock ran its function over foreign data")
			return nil
		}))
		if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Unlock = %v, want ErrNotHeld", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the calls took %v: a permanent error must return at once", took)
		}
		if after := stateOf(t, ctx, admin, name); after != before {
			t.Errorf("foreign %s modified: %+v -> %+v", before.kind, before, after)
		}
		if n := admin.DBSize(ctx).Val(); n != 1 {
			t.Errorf("%d keys on the server, want only the foreign one", n)
		}
	})
}

// writeForeign puts data of the given kind at key and returns the string it
// stored, if it stored a string.
func writeForeign(t *testing.T, ctx context.Context, admin *redis.Client, key string, kind uint8, value string, ttl time.Duration) *string {
	t.Helper()
	var err error
	var stored *string
	switch kind {
	case foreignHash:
		err = admin.HSet(ctx, key, value, value).Err()
	case foreignList:
		err = admin.RPush(ctx, key, value).Err()
	case foreignSet:
		err = admin.SAdd(ctx, key, value).Err()
	case foreignZSet:
		err = admin.ZAdd(ctx, key, redis.Z{Score: 1, Member: value}).Err()
	case foreignUUIDNoTTL:
		value = uuid.NewSHA1(uuid.NameSpaceOID, []byte(value)).String()
		fallthrough
	default:
		stored = &value
		err = admin.Set(ctx, key, value, 0).Err()
	}
	if err == nil && ttl > 0 {
		err = admin.PExpire(ctx, key, ttl).Err()
	}
	if err != nil {
		t.Fatalf("writing foreign data: %v", err)
	}
	return stored
}

// checkTokenShaped: a token-shaped string at the key is someone's lock.
func checkTokenShaped(t *testing.T, ctx context.Context, admin *redis.Client, m *dlock.Mutex, ttl time.Duration, before keyState) {
	t.Helper()
	st, err := m.Inspect(ctx)
	switch {
	case err != nil || !st.Locked:
		t.Fatalf("Inspect = %+v, %v; want locked", st, err)
	case ttl == 0 && st.TTL != dlock.NoExpiry:
		t.Fatalf("Inspect TTL = %v, want NoExpiry", st.TTL)
	case ttl > 0 && (st.TTL <= 0 || st.TTL > ttl):
		t.Fatalf("Inspect TTL = %v, want in (0, %v]", st.TTL, ttl)
	}
	if locked, err := m.IsLocked(ctx); !locked || err != nil {
		t.Fatalf("IsLocked = %v, %v; want true", locked, err)
	}
	if ok, err := m.TryLock(ctx, 100*time.Millisecond); ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want (false, nil): the lock is held", ok, err)
	}
	lctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if err := m.Lock(lctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want its context's deadline", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock = %v, want ErrNotHeld", err)
	}
	if after := stateOf(t, ctx, admin, m.Name()); after != before {
		t.Fatalf("the held lock was modified: %+v -> %+v", before, after)
	}
	if ok, err := m.ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v; want it deleted", ok, err)
	}
	if exists(t, ctx, admin, m.Name()) {
		t.Fatal("key still exists after ForceUnlock")
	}
}

// ms converts fuzzed milliseconds to a Duration, saturating instead of
// wrapping, so that huge inputs stay huge.
func ms(v int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case v > most:
		return math.MaxInt64
	case v < -most:
		return math.MinInt64
	}
	return time.Duration(v) * time.Millisecond
}

// badOptions lists, as the words their errors use, the Client options that
// the documentation says New refuses; the drift margin is 1% + 1ms.
func badOptions(timeout, interval time.Duration, batch int) []string {
	var bad []string
	if timeout <= 0 {
		bad = append(bad, "watchdog timeout")
	}
	if interval < time.Millisecond || interval >= timeout-timeout/100-time.Millisecond {
		bad = append(bad, "renew interval")
	}
	if batch <= 0 {
		bad = append(bad, "renew batch size")
	}
	return bad
}

// FuzzOptions shows that any option values either make New (or the handle's
// calls, for WithLeaseTime) fail with ErrInvalidArgument naming the bad
// option, exactly when the documentation says they are invalid, or give a
// working lock: TryLock acquires, the hold is held while its lease (1s or
// more) lasts, Unlock releases it, and a hold whose Lock context ends is
// released at once. fixedLease selects WithLeaseTime(leaseMs) over the
// watchdog's lease.
func FuzzOptions(f *testing.F) {
	for _, s := range []struct {
		timeout, interval, lease int64
		batch                    int
		fixed                    bool
	}{
		{30_000, 10_000, 10_000, 500, false},
		{30_000, 10_000, 10_000, 500, true},
		{3, 1, 1, 1, false},                                    // the smallest valid watchdog
		{3, 1, 1, 1, true},                                     // a 1ms fixed lease
		{2, 1, 2, 1, false},                                    // no room for the drift margin
		{1000, 989, 1000, 1, false},                            // just inside the margin
		{1000, 990, 1000, 1, false},                            // just outside
		{0, 0, 0, 0, true},                                     // zeros
		{-1, -1, -1, -1, true},                                 // negatives
		{1000, 0, 1000, 500, false},                            // zero interval
		{1000, 1000, 1000, 500, false},                         // interval = timeout
		{1000, 2000, 1000, 500, false},                         // interval above timeout
		{1000, 100, 1000, 0, false},                            // zero batch
		{1000, 100, 0, 500, true},                              // zero lease
		{1000, 100, -5, 500, true},                             // negative lease
		{math.MaxInt64, 1000, 1000, math.MaxInt, false},        // "forever" watchdog lease
		{1000, 100, math.MaxInt64, math.MaxInt, true},          // "forever" fixed lease
		{math.MaxInt64, math.MaxInt64, math.MaxInt64, 1, true}, // both saturate: interval = timeout
		{math.MaxInt64, 1, math.MaxInt64 / 1_000_000, 1, true}, // 292 years, not saturated
		{math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt, true},
	} {
		f.Add(s.timeout, s.interval, s.lease, s.batch, s.fixed)
	}
	srv := testserver.StartRedis(f)
	rdb, admin := srv.Client(), srv.Admin() // dlock gets the least-privilege user; the test looks with every right
	const name = "fuzz:options"
	f.Fuzz(func(t *testing.T, timeoutMs, intervalMs, leaseMs int64, batch int, fixedLease bool) {
		ctx := freshInput(t, admin)
		timeout, interval, lease := ms(timeoutMs), ms(intervalMs), ms(leaseMs)
		bad := badOptions(timeout, interval, batch)
		c, err := dlock.New(rdb, dlock.WithWatchdogTimeout(timeout), dlock.WithRenewInterval(interval),
			dlock.WithRenewBatchSize(batch))
		switch {
		case err != nil && len(bad) == 0:
			t.Fatalf("New(timeout %v, interval %v, batch %d) = %v; the options are valid", timeout, interval, batch, err)
		case err != nil:
			if !errors.Is(err, dlock.ErrInvalidArgument) || !containsAny(err.Error(), bad) {
				t.Fatalf("New = %v, want ErrInvalidArgument naming one of %q", err, bad)
			}
			return
		case len(bad) > 0:
			_ = c.Close()
			t.Fatalf("New(timeout %v, interval %v, batch %d) accepted a bad %q", timeout, interval, batch, bad)
		}
		t.Cleanup(func() { _ = c.Close() })

		var opts []dlock.MutexOption
		hold := timeout
		if fixedLease {
			opts, hold = append(opts, dlock.WithLeaseTime(lease)), lease
		}
		m := c.NewMutex(name, opts...)
		if hold <= 0 {
			ok, err := m.TryLock(ctx, 0)
			if ok || !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "lease time") {
				t.Fatalf("TryLock with lease %v = %v, %v; want ErrInvalidArgument naming the lease time", lease, ok, err)
			}
			if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Fatalf("Unlock with lease %v = %v; want ErrInvalidArgument", lease, err)
			}
			return
		}
		long := hold >= time.Second // else the hold may be lost before we look

		if ok, err := m.TryLock(ctx, 0); !ok || err != nil {
			t.Fatalf("TryLock (lease %v) = %v, %v; want acquired", hold, ok, err)
		}
		if long && (!m.IsHeld() || !exists(t, ctx, admin, name)) {
			t.Fatalf("a hold with lease %v is not held right after TryLock: IsHeld = %v, Err = %v", hold, m.IsHeld(), m.Err())
		}
		if err := m.Unlock(ctx); err != nil && (long || !errors.Is(err, dlock.ErrLockLost)) {
			t.Fatalf("Unlock (lease %v) = %v", hold, err)
		}
		testserver.WaitFor(t, time.Second, "the key to go after Unlock", func() bool { return !exists(t, ctx, admin, name) })

		hctx, cancel := context.WithCancel(ctx)
		if ok, err := m.TryLock(hctx, 0); !ok || err != nil {
			cancel()
			t.Fatalf("TryLock again (lease %v) = %v, %v; want acquired", hold, ok, err)
		}
		cancel()
		select {
		case <-m.Done():
		case <-time.After(time.Second):
			t.Fatalf("Done not closed 1s after the Lock context ended (lease %v)", hold)
		}
		testserver.WaitFor(t, time.Second, fmt.Sprintf("the key to be released when the Lock context ended (lease %v)", hold),
			func() bool { return !exists(t, ctx, admin, name) })
		if err := m.Unlock(ctx); err != nil && (long || !errors.Is(err, dlock.ErrLockLost)) {
			t.Fatalf("Unlock after the Lock context ended (lease %v) = %v, want nil", hold, err)
		}
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// FuzzForceUnlockRacesHolder shows that Unlock is token-checked: a holder
// unlocks 1ms after it starts while, delayUs microseconds after that start,
// an operator's ForceUnlock deletes the lock and a third Client takes it at
// once. Whichever comes first, exactly one of them deletes the holder's key
// (ForceUnlock reports true and Unlock ErrLockLost, or Unlock nil and
// ForceUnlock false), the third Client always acquires, and the holder's
// late Unlock never deletes the third Client's key. Small delays make the
// operator usually win, large ones the holder; after the race the same
// sequence runs in the order the race may miss, forced.
func FuzzForceUnlockRacesHolder(f *testing.F) {
	for _, d := range []uint16{0, 100, 300, 600, 900, 1000, 1100, 1500, 2500, 3999, 65535} {
		f.Add(d)
	}
	srv := testserver.StartRedis(f)
	rdb, admin := srv.Client(), srv.Admin() // dlock gets the least-privilege user; the test looks with every right
	const name = "fuzz:race"
	f.Fuzz(func(t *testing.T, delayUs uint16) {
		ctx := freshInput(t, admin)
		holder := newFuzzClient(t, rdb).NewMutex(name)
		operator := newFuzzClient(t, rdb).NewMutex(name)
		third := newFuzzClient(t, rdb).NewMutex(name)
		if ok, err := holder.TryLock(ctx, 0); !ok || err != nil {
			t.Fatalf("holder TryLock = %v, %v", ok, err)
		}

		var (
			forced             bool
			forceErr, thirdErr error
			thirdOK            bool
			done               = make(chan struct{})
		)
		start := time.Now()
		go func() {
			defer close(done)
			time.Sleep(time.Until(start.Add(time.Duration(delayUs%4000) * time.Microsecond)))
			if forced, forceErr = operator.ForceUnlock(ctx); forceErr == nil {
				thirdOK, thirdErr = third.TryLock(ctx, 0)
			}
		}()
		time.Sleep(time.Until(start.Add(time.Millisecond)))
		unlockErr := holder.Unlock(ctx)
		<-done

		if forceErr != nil || thirdErr != nil || !thirdOK {
			t.Fatalf("ForceUnlock = %v; third TryLock = %v, %v; want the third to acquire", forceErr, thirdOK, thirdErr)
		}
		if forced && !errors.Is(unlockErr, dlock.ErrLockLost) || !forced && unlockErr != nil {
			t.Fatalf("ForceUnlock deleted = %v but holder Unlock = %v: exactly one must have deleted the key", forced, unlockErr)
		}
		checkThirdKept(t, ctx, admin, third)
		t.Logf("delay %dµs: ForceUnlock deleted the holder's key: %v", delayUs%4000, forced)

		// Forced order: ForceUnlock, the third acquires, then the holder's late Unlock.
		if ok, err := holder.TryLock(ctx, 0); !ok || err != nil {
			t.Fatalf("holder TryLock again = %v, %v", ok, err)
		}
		if ok, err := operator.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		if ok, err := third.TryLock(ctx, 0); !ok || err != nil {
			t.Fatalf("third TryLock again = %v, %v", ok, err)
		}
		if err := holder.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("the holder's late Unlock = %v, want ErrLockLost", err)
		}
		checkThirdKept(t, ctx, admin, third)
	})
}

// checkThirdKept: the third Client's key survived, holding its token, and
// its own Unlock releases it.
func checkThirdKept(t *testing.T, ctx context.Context, admin *redis.Client, third *dlock.Mutex) {
	t.Helper()
	if !exists(t, ctx, admin, third.Name()) || !third.IsHeld() {
		t.Fatalf("the third Client's lock was deleted (IsHeld = %v, Err = %v)", third.IsHeld(), third.Err())
	}
	if err := third.Unlock(ctx); err != nil {
		t.Fatalf("the third Client's Unlock = %v: its key no longer held its token", err)
	}
}

// A server that refuses scripts (EVAL and EVALSHA renamed away) makes every
// call that needs Redis fail at once with ErrNoScripting naming the lock, and
// leaves nothing held; Unlock after the failed Lock reports ErrNotHeld, as on
// any handle that holds nothing.
func TestServerRefusingScriptsFailsClearly(t *testing.T) {
	srv := testserver.StartRedis(t, "--rename-command", "EVAL", "", "--rename-command", "EVALSHA", "")
	c, err := dlock.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const name = "lock:noscript"
	m := c.NewMutex(name)
	quick := func(call string, want error, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s took %v, want an answer at once", call, took)
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("%s = %v, want %v naming %q", call, err, want, name)
		}
	}
	quick("Lock", dlock.ErrNoScripting, m.Lock)
	quick("TryLock", dlock.ErrNoScripting, func(ctx context.Context) error {
		ok, err := m.TryLock(ctx, 2*time.Second)
		if ok {
			t.Error("TryLock acquired")
		}
		return err
	})
	quick("Unlock", dlock.ErrNotHeld, m.Unlock)
	quick("IsLocked", dlock.ErrNoScripting, func(ctx context.Context) error { _, err := m.IsLocked(ctx); return err })
	quick("TTL", dlock.ErrNoScripting, func(ctx context.Context) error { _, err := m.TTL(ctx); return err })
	quick("Inspect", dlock.ErrNoScripting, func(ctx context.Context) error { _, err := m.Inspect(ctx); return err })
	quick("ForceUnlock", dlock.ErrNoScripting, func(ctx context.Context) error {
		ok, err := m.ForceUnlock(ctx)
		if ok {
			t.Error("ForceUnlock reported a deletion")
		}
		return err
	})
	quick("WithLock", dlock.ErrNoScripting, func(ctx context.Context) error {
		return c.WithLock(ctx, name, func(context.Context, int64) error {
			t.Error("WithLock ran its function")
			return nil
		})
	})
	if m.IsHeld() || m.HoldCount() != 0 || m.FencingToken() != 0 {
		t.Error("a handle whose every Lock failed reports a hold")
	}
}
