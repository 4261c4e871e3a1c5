package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// The Java peer of these tests runs Redisson's RFairLock scripts
// (RedissonFairLock.java: tryLockInnerAsync, EVAL_LONG and EVAL_NULL_BOOLEAN
// variants; unlockInnerAsync; acquireFailedAsync) verbatim through the admin
// connection, with Redisson's arguments: the lease, the owner field
// "<uuid>:<thread>", the threadWaitTime and System.currentTimeMillis().
const (
	rfairJavaID = "6a1c2e3f-4b5d-4e6f-8a9b-0c1d2e3f4a5b" // the peer's connection-manager id
	rfairGoID   = "0f9e8d7c-6b5a-4c3d-9e1f-a2b3c4d5e6f7" // the Go Client's
	rfairWait   = 300000                                 // Redisson's default threadWaitTime (ms)

	// tryLockInnerAsync, EVAL_LONG: KEYS name, queue, timeouts; ARGV lease,
	// field, wait, currentTime. nil when acquired, else a ttl.
	rfairJavaLock = "while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then break; end;" +
		"local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));" +
		"if timeout <= tonumber(ARGV[4]) then " +
		"redis.call('zrem', KEYS[3], firstThreadId2);" +
		"redis.call('lpop', KEYS[2]);" +
		"else break; end;" +
		"end;" +
		"if (redis.call('exists', KEYS[1]) == 0) " +
		"and ((redis.call('exists', KEYS[2]) == 0) " +
		"or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then " +
		"redis.call('lpop', KEYS[2]);" +
		"redis.call('zrem', KEYS[3], ARGV[2]);" +
		"local keys = redis.call('zrange', KEYS[3], 0, -1);" +
		"for i = 1, #keys, 1 do " +
		"redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);" +
		"end;" +
		"redis.call('hset', KEYS[1], ARGV[2], 1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then " +
		"redis.call('hincrby', KEYS[1], ARGV[2],1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		"while true do " +
		"local firstThreadId = redis.call('lindex', KEYS[2], 0);" +
		"if (firstThreadId == false) or (firstThreadId == ARGV[2]) then break; end;" +
		"local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId));" +
		"if (timeout > tonumber(ARGV[4])) and (redis.call('exists', KEYS[1]) ==0) then " +
		"redis.call('lpop', KEYS[2]);" +
		"redis.call('zrem', KEYS[3], firstThreadId);" +
		"else break; end;" +
		"end;" +
		"local timeout = redis.call('zscore', KEYS[3], ARGV[2]);" +
		"if timeout ~= false then " +
		"return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);" +
		"end;" +
		"local lastThreadId = redis.call('lindex', KEYS[2], -1);" +
		"local ttl;" +
		"if lastThreadId ~= false and lastThreadId ~= ARGV[2] then " +
		"ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);" +
		"else " +
		"ttl = redis.call('pttl', KEYS[1]);" +
		"end;" +
		"local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);" +
		"if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then " +
		"redis.call('rpush', KEYS[2], ARGV[2]);" +
		"end;" +
		"return ttl;"

	// unlockInnerAsync: KEYS name, queue, timeouts, channel; ARGV "0",
	// lease, field, currentTime. 1 released, 0 counted down, nil not the owner.
	rfairJavaUnlock = "while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then break; end; " +
		"local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));" +
		"if timeout <= tonumber(ARGV[4]) then " +
		"redis.call('zrem', KEYS[3], firstThreadId2); " +
		"redis.call('lpop', KEYS[2]); " +
		"else break; end; " +
		"end;" +
		"if (redis.call('exists', KEYS[1]) == 0) then " +
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
		"if nextThreadId ~= false then " +
		"redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
		"end; " +
		"return 1; " +
		"end;" +
		"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; " +
		"redis.call('del', KEYS[1]); " +
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
		"if nextThreadId ~= false then " +
		"redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
		"end; " +
		"return 1; "

	// acquireFailedAsync: KEYS queue, timeouts; ARGV field, wait.
	rfairJavaLeave = "local queue = redis.call('lrange', KEYS[1], 0, -1);" +
		"local i = 1;" +
		"while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1; end;" +
		"i = i + 1;" +
		"while i <= #queue do " +
		"redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);" +
		"i = i + 1;" +
		"end;" +
		"redis.call('zrem', KEYS[2], ARGV[1]);" +
		"redis.call('lrem', KEYS[1], 0, ARGV[1]);"
)

// rfairKeys are Redisson's fair-lock keys of name (prefixName).
func rfairKeys(name string) (queue, timeouts, channel, token string) {
	return "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}",
		"redisson_lock__channel:{" + name + "}", "redisson_lock_token:{" + name + "}"
}

// rfairPeer is one Java thread of the peer.
type rfairPeer struct {
	t      testing.TB
	rdb    *redis.Client
	thread int
}

func (p rfairPeer) field() string { return rfairJavaID + ":" + strconv.Itoa(p.thread) }

// lock runs tryLockInnerAsync (EVAL_LONG) with lease: true when acquired,
// else false and the ttl Redisson answers (the peer is then in the line).
func (p rfairPeer) lock(name string, lease time.Duration) (bool, int64) {
	p.t.Helper()
	q, ts, _, _ := rfairKeys(name)
	v, err := p.rdb.Eval(context.Background(), rfairJavaLock, []string{name, q, ts},
		lease.Milliseconds(), p.field(), rfairWait, time.Now().UnixMilli()).Result()
	if errors.Is(err, redis.Nil) {
		return true, 0
	}
	if err != nil {
		p.t.Fatalf("java fair lock: %v", err)
	}
	return false, v.(int64)
}

// unlock runs unlockInnerAsync: 1 released, 0 counted down, -1 not the owner.
func (p rfairPeer) unlock(name string) int64 {
	p.t.Helper()
	q, ts, ch, _ := rfairKeys(name)
	v, err := p.rdb.Eval(context.Background(), rfairJavaUnlock, []string{name, q, ts, ch},
		"0", 30000, p.field(), time.Now().UnixMilli()).Result()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	if err != nil {
		p.t.Fatalf("java fair unlock: %v", err)
	}
	return v.(int64)
}

// leave runs acquireFailedAsync.
func (p rfairPeer) leave(name string) {
	p.t.Helper()
	q, ts, _, _ := rfairKeys(name)
	err := p.rdb.Eval(context.Background(), rfairJavaLeave, []string{q, ts}, p.field(), rfairWait).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		p.t.Fatalf("java fair leave: %v", err)
	}
}

// subscribe subscribes the peer thread to its own channel, as
// RedissonFairLock.subscribe does, and waits for the confirmation.
func (p rfairPeer) subscribe(name string) *redis.PubSub {
	p.t.Helper()
	_, _, ch, _ := rfairKeys(name)
	ps := p.rdb.Subscribe(context.Background(), ch+":"+p.field())
	if _, err := ps.Receive(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = ps.Close() })
	return ps
}

// rfairExpect waits up to d for the message "0" on the peer's channel.
func rfairExpect(t testing.TB, ps *redis.PubSub, channel string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("no message on %s within %v: %v", channel, d, err)
	}
	if m.Channel != channel || m.Payload != "0" {
		t.Fatalf("message %q on %s, want \"0\" on %s", m.Payload, m.Channel, channel)
	}
}

// rfairClient is a Go Client WithRedissonCompat on which only a message
// wakes a waiter quickly: a 10s constant backoff and 30s leases.
func rfairClient(t testing.TB, srv *testserver.Redis, id string, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	opts = append([]dlock.Option{dlock.WithRedissonCompat(id), dlock.WithWatchdogTimeout(30 * time.Second),
		dlock.WithRenewInterval(10 * time.Second), slowBackOff()}, opts...)
	return newClient(t, srv.Client(), opts...)
}

// rfairLine reads Redisson's queue of name.
func rfairLine(t testing.TB, admin *redis.Client, name string) []string {
	t.Helper()
	q, _, _, _ := rfairKeys(name)
	ids, err := admin.LRange(context.Background(), q, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func rfairAwaitLine(t testing.TB, admin *redis.Client, name string, n int) []string {
	t.Helper()
	var ids []string
	testserver.WaitFor(t, 5*time.Second, fmt.Sprintf("%d waiters in Redisson's line of %s", n, name), func() bool {
		ids = rfairLine(t, admin, name)
		return len(ids) == n
	})
	return ids
}

// rfairSubscribed waits until someone listens on channel.
func rfairSubscribed(t testing.TB, admin *redis.Client, channel string) {
	t.Helper()
	testserver.WaitFor(t, 5*time.Second, "a subscription to "+channel, func() bool {
		return admin.PubSubNumSub(context.Background(), channel).Val()[channel] > 0
	})
}

// rfairState checks the lock hash of name: exactly the fields want (field ->
// count), and a TTL in (0, lease] when it exists.
func rfairState(t testing.TB, admin *redis.Client, name string, want map[string]string, lease time.Duration, after string) {
	t.Helper()
	ctx := context.Background()
	if len(want) == 0 {
		if n := admin.Exists(ctx, name).Val(); n != 0 {
			t.Fatalf("after %s: the lock %s exists (%v), want none", after, name, admin.HGetAll(ctx, name).Val())
		}
		return
	}
	if kind := admin.Type(ctx, name).Val(); kind != "hash" {
		t.Fatalf("after %s: the lock is a %s, want a hash", after, kind)
	}
	got := admin.HGetAll(ctx, name).Val()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after %s: the lock hash is %v, want %v", after, got, want)
	}
	if pttl := admin.PTTL(ctx, name).Val(); pttl <= 0 || pttl > lease {
		t.Fatalf("after %s: the lock's TTL is %v, want in (0, %v]", after, pttl, lease)
	}
}

// A Go FairMutex writes what Redisson's RFairLock writes: the hash at the
// name with the field "<clientID>:<owner>" holding the hold count and the
// watchdog's lease as TTL; RFencedLock's counter; a Go waiter in Redisson's
// queue under its field with the timeout Redisson computes (the lock's PTTL
// + the wait + the client's clock, chained from the waiter ahead); its
// leaving as Redisson's acquireFailed; on Unlock the field gone and "0" on
// the next waiter's own channel.
func TestRedissonFairMutexLayout(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	name := "rfair-layout"
	q, ts, ch, token := rfairKeys(name)
	c := rfairClient(t, srv, rfairGoID)
	f := c.NewFairMutex(name, dlock.WithReentrant())
	if got := f.WaitTimeout(); got != dlock.DefaultRedissonFairWaitTimeout {
		t.Fatalf("WaitTimeout = %v, want Redisson's %v", got, dlock.DefaultRedissonFairWaitTimeout)
	}
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	fields := admin.HKeys(ctx, name).Val()
	if len(fields) != 1 || !strings.HasPrefix(fields[0], rfairGoID+":go-") {
		t.Fatalf("lock fields %v, want one \"%s:go-<n>\"", fields, rfairGoID)
	}
	goField := fields[0]
	rfairState(t, admin, name, map[string]string{goField: "1"}, 30*time.Second, "Lock")
	if v := admin.Get(ctx, token).Val(); v != "1" || f.FencingToken() != 1 {
		t.Fatalf("token key %s = %q, FencingToken %d; want 1 and 1 (RFencedLock's INCR)", token, v, f.FencingToken())
	}
	if n := admin.Exists(ctx, q, ts).Val(); n != 0 {
		t.Fatalf("%d queue keys after an uncontended Lock, want none", n)
	}
	// Reentry counts up in the field, Unlock counts down.
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rfairState(t, admin, name, map[string]string{goField: "2"}, 30*time.Second, "a reentrant Lock")
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rfairState(t, admin, name, map[string]string{goField: "1"}, 30*time.Second, "counting down")

	// A Java thread queues behind the Go hold, with Redisson's timeout.
	peer := rfairPeer{t, admin, 1}
	before := time.Now().UnixMilli()
	if ok, ttl := peer.lock(name, 30*time.Second); ok || ttl <= 0 {
		t.Fatalf("java lock while Go holds: acquired %v, ttl %d", ok, ttl)
	}
	ps := peer.subscribe(name)
	// A Go waiter of another Client queues behind the peer: its timeout is
	// chained from the peer's (Redisson: the last waiter's timeout + wait).
	g2 := rfairClient(t, srv, "1d2c3b4a-5f6e-4a7b-8c9d-0e1f2a3b4c5d")
	f2 := g2.NewFairMutex(name)
	res := make(chan error, 1)
	wctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	go func() { res <- f2.Lock(wctx) }()
	line := rfairAwaitLine(t, admin, name, 2)
	if line[0] != peer.field() || !strings.HasPrefix(line[1], "1d2c3b4a-5f6e-4a7b-8c9d-0e1f2a3b4c5d:go-") {
		t.Fatalf("line %v, want the peer then the Go waiter", line)
	}
	peerTimeout := admin.ZScore(ctx, ts, peer.field()).Val()
	goTimeout := admin.ZScore(ctx, ts, line[1]).Val()
	if peerTimeout < float64(before+rfairWait+29000) || peerTimeout > float64(time.Now().UnixMilli()+rfairWait+30000) {
		t.Fatalf("peer timeout %v, want about now + 30s + %dms", peerTimeout, rfairWait)
	}
	if goTimeout != peerTimeout+rfairWait {
		t.Fatalf("Go waiter's timeout %v, want the peer's %v + the wait %d (Redisson's chaining)", goTimeout, peerTimeout, rfairWait)
	}
	if kind := admin.Type(ctx, q).Val() + "/" + admin.Type(ctx, ts).Val(); kind != "list/zset" {
		t.Fatalf("queue/timeouts are %s, want list/zset", kind)
	}
	// The Go waiter gives up: Redisson's acquireFailed (it was last, so no
	// timeout moves).
	cancelWait()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v", err)
	}
	if line := rfairLine(t, admin, name); len(line) != 1 || line[0] != peer.field() {
		t.Fatalf("line after the Go waiter left: %v", line)
	}
	if n := admin.ZCard(ctx, ts).Val(); n != 1 || admin.ZScore(ctx, ts, peer.field()).Val() != peerTimeout {
		t.Fatalf("timeouts after the Go waiter left: %v", admin.ZRangeWithScores(ctx, ts, 0, -1).Val())
	}

	// The last Unlock deletes the hash and publishes "0" on the peer's channel.
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rfairExpect(t, ps, ch+":"+peer.field(), time.Second)
	rfairState(t, admin, name, nil, 0, "Unlock")
	// The peer takes its turn: Redisson's grant leaves no line behind.
	if ok, _ := peer.lock(name, 30*time.Second); !ok {
		t.Fatal("the peer first in line did not get the lock after Unlock")
	}
	rfairState(t, admin, name, map[string]string{peer.field(): "1"}, 30*time.Second, "the peer's grant")
	if n := admin.Exists(ctx, q).Val() + admin.ZCard(ctx, ts).Val(); n != 0 {
		t.Fatalf("line left after the peer's grant: %v %v", rfairLine(t, admin, name), admin.ZRange(ctx, ts, 0, -1).Val())
	}
	if peer.unlock(name) != 1 {
		t.Fatal("peer unlock")
	}
	// A second Go hold takes the next token.
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := admin.Get(ctx, token).Val(); v != "2" || f.FencingToken() != 2 {
		t.Fatalf("token %q, FencingToken %d; want 2", v, f.FencingToken())
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rfairState(t, admin, name, nil, 0, "the second Unlock")
}

// Go and the Java peer exclude each other both ways: a Go TryLock fails
// while the peer holds, even with the lock free but the peer first in line;
// the peer's script answers a ttl while Go holds, and its unlock is refused.
func TestRedissonFairMutexExcludesPeer(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	name := "rfair-exclude"
	c := rfairClient(t, srv, rfairGoID)
	f := c.NewFairMutex(name)
	peer := rfairPeer{t, admin, 7}

	if ok, _ := peer.lock(name, 30*time.Second); !ok {
		t.Fatal("peer lock")
	}
	if ok, err := f.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("Go TryLock(0) while the peer holds: %v, %v", ok, err)
	}
	if n := len(rfairLine(t, admin, name)); n != 0 {
		t.Fatalf("TryLock(0) queued (%d in line); Redisson's tryLock() does not", n)
	}
	start := time.Now()
	if ok, err := f.TryLock(ctx, 200*time.Millisecond); ok || err != nil {
		t.Fatalf("Go TryLock(200ms) while the peer holds: %v, %v", ok, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("TryLock(200ms) took %v", d)
	}
	if n := len(rfairLine(t, admin, name)); n != 0 {
		t.Fatalf("a timed-out TryLock stayed in line (%d)", n)
	}
	if peer.unlock(name) != 1 {
		t.Fatal("peer unlock")
	}

	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	other := rfairPeer{t, admin, 8}
	if ok, ttl := other.lock(name, 30*time.Second); ok || ttl <= 0 || ttl > 30000 {
		t.Fatalf("peer lock while Go holds: acquired %v, ttl %d", ok, ttl)
	}
	if st := other.unlock(name); st != -1 {
		t.Fatalf("peer unlock of a Go hold answered %d, want nil (IllegalMonitorStateException)", st)
	}
	if !f.IsHeld() {
		t.Fatal("the Go hold ended")
	}
	other.leave(name)
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Free lock, but a peer first in line: Go's TryLock(0) respects the line.
	if ok, _ := peer.lock(name, 30*time.Second); !ok {
		t.Fatal("peer lock")
	}
	if ok, _ := other.lock(name, 30*time.Second); ok {
		t.Fatal("second peer got a held lock")
	}
	if peer.unlock(name) != 1 {
		t.Fatal("peer unlock")
	}
	if ok, err := f.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("Go TryLock(0) with a peer first in line: %v, %v", ok, err)
	}
	if ok, _ := other.lock(name, 30*time.Second); !ok {
		t.Fatal("the peer first in line did not get the free lock")
	}
}

// A Go waiter is woken by the peer's unlock, which publishes "0" on the
// waiter's own channel redisson_lock__channel:{name}:<its field>: with a 10s
// backoff and a 30s lease, only the message can wake it in under a second.
func TestRedissonFairMutexGoWokenByPeerUnlock(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	name := "rfair-wake-go"
	_, _, ch, _ := rfairKeys(name)
	c := rfairClient(t, srv, rfairGoID)
	f := c.NewFairMutex(name)
	peer := rfairPeer{t, admin, 1}
	if ok, _ := peer.lock(name, 30*time.Second); !ok {
		t.Fatal("peer lock")
	}
	got := make(chan error, 1)
	go func() { got <- f.Lock(ctx) }()
	line := rfairAwaitLine(t, admin, name, 1)
	rfairSubscribed(t, admin, ch+":"+line[0])
	select {
	case err := <-got:
		t.Fatalf("Lock returned while the peer holds: %v", err)
	default:
	}
	start := time.Now()
	if peer.unlock(name) != 1 {
		t.Fatal("peer unlock")
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("the Go waiter was not woken by the peer's unlock within 1s")
	}
	t.Logf("woken after %v", time.Since(start))
	rfairState(t, admin, name, map[string]string{line[0]: "1"}, 30*time.Second, "the woken Lock")
	if n := len(rfairLine(t, admin, name)); n != 0 {
		t.Fatalf("%d left in line", n)
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// The line is kept across Go and Java waiters: peer holds; Go G1, peer P2,
// Go G3 queue in that order; each release wakes exactly the next in line on
// its own channel, and nobody overtakes.
func TestRedissonFairMutexQueueOrderAcrossPeers(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	name := "rfair-order"
	_, _, ch, _ := rfairKeys(name)
	g1 := rfairClient(t, srv, rfairGoID).NewFairMutex(name)
	g3 := rfairClient(t, srv, "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f").NewFairMutex(name)
	p0, p2 := rfairPeer{t, admin, 10}, rfairPeer{t, admin, 12}

	if ok, _ := p0.lock(name, 30*time.Second); !ok {
		t.Fatal("p0 lock")
	}
	r1, r3 := make(chan error, 1), make(chan error, 1)
	go func() { r1 <- g1.Lock(ctx) }()
	line := rfairAwaitLine(t, admin, name, 1)
	if ok, _ := p2.lock(name, 30*time.Second); ok {
		t.Fatal("p2 got a held lock")
	}
	ps2 := p2.subscribe(name)
	go func() { r3 <- g3.Lock(ctx) }()
	line = rfairAwaitLine(t, admin, name, 3)
	if line[1] != p2.field() {
		t.Fatalf("line %v, want G1, P2, G3", line)
	}
	rfairSubscribed(t, admin, ch+":"+line[0])
	rfairSubscribed(t, admin, ch+":"+line[2])

	// P0 unlocks: G1, first in line, is told and takes the lock.
	if p0.unlock(name) != 1 {
		t.Fatal("p0 unlock")
	}
	select {
	case err := <-r1:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("G1 was not woken within 1s")
	}
	if ok, _ := p2.lock(name, 30*time.Second); ok {
		t.Fatal("P2 got the lock G1 holds")
	}
	// G1 unlocks: "0" goes to P2's channel, not to G3's.
	if err := g1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rfairExpect(t, ps2, ch+":"+p2.field(), time.Second)
	select {
	case err := <-r3:
		t.Fatalf("G3 overtook P2: %v", err)
	default:
	}
	if ok, _ := p2.lock(name, 30*time.Second); !ok {
		t.Fatal("P2, first in line, did not get the lock")
	}
	if line := rfairLine(t, admin, name); len(line) != 1 {
		_, ts, _, _ := rfairKeys(name)
		select {
		case err := <-r3:
			t.Logf("G3: %v", err)
		default:
		}
		t.Fatalf("line while P2 holds: %v, want G3 alone (%v)", line, admin.ZRangeWithScores(ctx, ts, 0, -1).Val())
	}
	// P2 unlocks: G3 is told and takes the lock.
	if p2.unlock(name) != 1 {
		t.Fatal("p2 unlock")
	}
	select {
	case err := <-r3:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("G3 was not woken within 1s")
	}
	if !g3.IsHeld() {
		t.Fatal("G3 does not hold")
	}
	if err := g3.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A hold whose Lock context ends is released in the background (the
// ownership's release with 4 arguments): the field goes and "0" reaches the
// next waiter's channel, as Redisson's unlock would send it. A field deleted
// behind the holder's back is a loss.
func TestRedissonFairMutexBackgroundReleaseAndLoss(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	name := "rfair-background"
	_, _, ch, _ := rfairKeys(name)
	c := rfairClient(t, srv, rfairGoID, dlock.WithWatchdogTimeout(lease), dlock.WithRenewInterval(renew))
	f := c.NewFairMutex(name)
	lctx, cancel := context.WithCancel(ctx)
	if err := f.Lock(lctx); err != nil {
		t.Fatal(err)
	}
	peer := rfairPeer{t, admin, 3}
	if ok, _ := peer.lock(name, 30*time.Second); ok {
		t.Fatal("peer got a held lock")
	}
	ps := peer.subscribe(name)
	// The watchdog keeps the Go hold past several leases.
	time.Sleep(3 * lease) // not synchronisation: the time the lease must survive
	if !f.IsHeld() || admin.Exists(ctx, name).Val() != 1 {
		t.Fatal("the watchdog did not keep the hold")
	}
	cancel()
	rfairExpect(t, ps, ch+":"+peer.field(), 2*time.Second)
	rfairState(t, admin, name, nil, 0, "the background release")
	if err := f.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the context ended: %v", err)
	}
	if ok, _ := peer.lock(name, 30*time.Second); !ok {
		t.Fatal("the peer did not get the released lock")
	}
	if peer.unlock(name) != 1 {
		t.Fatal("peer unlock")
	}

	// Loss: the field deleted by hand.
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	field := admin.HKeys(ctx, name).Val()[0]
	admin.HDel(ctx, name, field)
	if !closedWithin(f.Done(), 2*time.Second) {
		t.Fatal("Done did not close after the field was deleted")
	}
	if err := f.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", err)
	}
	if err := f.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after a loss = %v, want ErrLockLost", err)
	}
	// Fixed lease: it runs out, Redis drops the hash.
	fl := c.NewFairMutex(name, dlock.WithLeaseTime(lease))
	if err := fl.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if pttl := admin.PTTL(ctx, name).Val(); pttl <= 0 || pttl > lease {
		t.Fatalf("fixed lease TTL %v", pttl)
	}
	if !closedWithin(fl.Done(), 2*time.Second) {
		t.Fatal("a fixed lease did not end")
	}
	if err := fl.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", err)
	}
	_ = fl.Unlock(ctx)
}

// Three Go Clients with several handles each and a Java peer thread contend
// on one fair lock; at most one holds at any time.
func TestRedissonFairMutexContention(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	name := "rfair-contention"
	ids := []string{rfairGoID, "4d5e6f7a-8b9c-4d0e-9f1a-2b3c4d5e6f7a", "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"}
	var inside, most, total atomic.Int64
	enter := func() {
		n := inside.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		total.Add(1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, id := range ids {
		c := newClient(t, srv.Client(), dlock.WithRedissonCompat(id))
		for range 3 {
			f := c.NewFairMutex(name)
			wg.Go(func() {
				for range 5 {
					if err := f.Lock(ctx); err != nil {
						errs <- err
						return
					}
					enter()
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := f.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	// The peer thread polls with Redisson's queueing script.
	peer := rfairPeer{t, admin, 99}
	wg.Go(func() {
		for got := 0; got < 5; {
			if ctx.Err() != nil {
				return
			}
			if ok, _ := peer.lock(name, 30*time.Second); ok {
				enter()
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				peer.unlock(name)
				got++
				continue
			}
			time.Sleep(5 * time.Millisecond) // the peer's poll interval, not synchronisation
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if most.Load() != 1 || total.Load() != int64(len(ids)*3*5+5) {
		t.Fatalf("at most %d inside (want 1), %d holds", most.Load(), total.Load())
	}
	if n := admin.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the lock is left held")
	}
}

// A Go TryLock(wait) queues with wait as Redisson's tryLock(waitTime) does
// (its timeout: the holder's PTTL + wait + the client's clock); when it runs
// out it leaves as Redisson's acquireFailed: the waiters behind it move their
// timeouts earlier by that wait, and the line keeps its order.
func TestRedissonFairMutexTryLockLeavesLikeAcquireFailed(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	name := "rfair-leave"
	_, ts, _, _ := rfairKeys(name)
	f := rfairClient(t, srv, rfairGoID).NewFairMutex(name)
	p0, p2 := rfairPeer{t, admin, 1}, rfairPeer{t, admin, 2}
	if ok, _ := p0.lock(name, 30*time.Second); !ok {
		t.Fatal("p0 lock")
	}
	const wait = 1500 * time.Millisecond
	before := time.Now().UnixMilli()
	res := make(chan error, 1)
	go func() {
		ok, err := f.TryLock(ctx, wait)
		if err == nil && ok {
			err = errors.New("acquired a held lock")
		}
		res <- err
	}()
	line := rfairAwaitLine(t, admin, name, 1)
	goTimeout := admin.ZScore(ctx, ts, line[0]).Val()
	if lo, hi := float64(before+28000+wait.Milliseconds()), float64(time.Now().UnixMilli()+30000+wait.Milliseconds()); goTimeout < lo || goTimeout > hi {
		t.Fatalf("Go waiter's timeout %v, want in [%v, %v] (PTTL + wait + now)", goTimeout, lo, hi)
	}
	if ok, _ := p2.lock(name, 30*time.Second); ok {
		t.Fatal("p2 got a held lock")
	}
	p2Timeout := admin.ZScore(ctx, ts, p2.field()).Val()
	if p2Timeout != goTimeout+rfairWait {
		t.Fatalf("p2's timeout %v, want the Go waiter's %v + %d", p2Timeout, goTimeout, rfairWait)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if line := rfairLine(t, admin, name); len(line) != 1 || line[0] != p2.field() {
		t.Fatalf("line after the Go waiter gave up: %v, want p2 alone", line)
	}
	if got := admin.ZScore(ctx, ts, p2.field()).Val(); got != p2Timeout-float64(wait.Milliseconds()) {
		t.Fatalf("p2's timeout after the Go waiter left: %v, want %v - %d", got, p2Timeout, wait.Milliseconds())
	}
}
