package integration

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// A Java service using Redisson's RReadWriteLock, played from Redisson's
// published data model: the scripts below are RedissonReadLock's and
// RedissonWriteLock's tryLockInnerAsync and unlockInnerAsync (with their
// unlock latch), sent with Redisson's KEYS and ARGV.
const (
	rwJavaID = "0f6c3a52-7d41-4b8e-9a3c-5e2d1b7f8c90" // the Java client's connection-manager id
	rwGoID   = "3c1d9e7a-2b5f-4a68-8d0e-f4a6b2c8e1d7" // the Go Client's WithRedissonCompat id

	javaReadTryLock = "local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call('hset', KEYS[1], 'mode', 'read'); " +
		"redis.call('hset', KEYS[1], ARGV[2], 1); " +
		"redis.call('set', KEYS[2] .. ':1', 1); " +
		"redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then " +
		"local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"local key = KEYS[2] .. ':' .. ind;" +
		"redis.call('set', key, 1); " +
		"redis.call('pexpire', key, ARGV[1]); " +
		"local remainTime = redis.call('pttl', KEYS[1]); " +
		"redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); " +
		"return nil; " +
		"end;" +
		"return redis.call('pttl', KEYS[1]);"

	javaReadUnlock = "local val = redis.call('get', KEYS[5]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
		"return 1; " +
		"end; " +
		"local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); " +
		"if (lockExists == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); " +
		"if (counter == 0) then " +
		"redis.call('hdel', KEYS[1], ARGV[2]); " +
		"end;" +
		"redis.call('del', KEYS[3] .. ':' .. (counter+1)); " +
		"if (redis.call('hlen', KEYS[1]) > 1) then " +
		"local maxRemainTime = -3; " +
		"local keys = redis.call('hkeys', KEYS[1]); " +
		"for n, key in ipairs(keys) do " +
		"counter = tonumber(redis.call('hget', KEYS[1], key)); " +
		"if type(counter) == 'number' then " +
		"for i=counter, 1, -1 do " +
		"local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); " +
		"maxRemainTime = math.max(remainTime, maxRemainTime);" +
		"end; " +
		"end; " +
		"end; " +
		"if maxRemainTime > 0 then " +
		"redis.call('pexpire', KEYS[1], maxRemainTime); " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
		"return 0; " +
		"end;" +
		"if mode == 'write' then " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
		"return 0;" +
		"end; " +
		"end; " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
		"return 1; "

	javaWriteTryLock = "local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call('hset', KEYS[1], 'mode', 'write'); " +
		"redis.call('hset', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (mode == 'write') then " +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"local currentExpire = redis.call('pttl', KEYS[1]); " +
		"redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); " +
		"return nil; " +
		"end; " +
		"end;" +
		"return redis.call('pttl', KEYS[1]);"

	javaWriteUnlock = "local val = redis.call('get', KEYS[3]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return 1; " +
		"end;" +
		"if (mode == 'write') then " +
		"local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); " +
		"if (lockExists == 0) then " +
		"return nil;" +
		"else " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
		"return 0; " +
		"else " +
		"redis.call('hdel', KEYS[1], ARGV[3]); " +
		"if (redis.call('hlen', KEYS[1]) == 1) then " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"else " +
		"redis.call('hset', KEYS[1], 'mode', 'read'); " +
		"end; " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return 1; " +
		"end; " +
		"end; " +
		"end; " +
		"return nil;"
)

// rwJava is one Redisson client using RReadWriteLock, on the admin connection.
type rwJava struct {
	t    testing.TB
	rdb  *redis.Client
	name string
}

func (p rwJava) field(thread int) string { return rwJavaID + ":" + strconv.Itoa(thread) }

// timeoutPrefix is RedissonReadLock.getReadWriteTimeoutNamePrefix.
func (p rwJava) timeoutPrefix(thread int) string {
	return "{" + p.name + "}:" + p.field(thread) + ":rwlock_timeout"
}

func (p rwJava) channel() string { return "redisson_rwlock:{" + p.name + "}" }

// answer turns a tryLock script's reply into (acquired, PTTL).
func (p rwJava) answer(v any, err error) (bool, int64) {
	p.t.Helper()
	if errors.Is(err, redis.Nil) {
		return true, 0
	}
	if err != nil {
		p.t.Fatalf("java tryLock: %v", err)
	}
	return false, v.(int64)
}

// readLock runs RReadLock.tryLock's script for thread with lease.
func (p rwJava) readLock(thread int, lease time.Duration) (bool, int64) {
	p.t.Helper()
	return p.answer(p.rdb.Eval(context.Background(), javaReadTryLock, []string{p.name, p.timeoutPrefix(thread)},
		lease.Milliseconds(), p.field(thread), p.field(thread)+":write").Result())
}

// writeLock runs RWriteLock.tryLock's script for thread with lease.
func (p rwJava) writeLock(thread int, lease time.Duration) (bool, int64) {
	p.t.Helper()
	return p.answer(p.rdb.Eval(context.Background(), javaWriteTryLock, []string{p.name},
		lease.Milliseconds(), p.field(thread)+":write").Result())
}

// unlockResult is the reply of an unlock script: 1 released, 0 counted down
// (or still held by others), -1 not the owner (Redisson throws
// IllegalMonitorStateException).
func (p rwJava) unlockResult(v any, err error) int64 {
	p.t.Helper()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	if err != nil {
		p.t.Fatalf("java unlock: %v", err)
	}
	return v.(int64)
}

func (p rwJava) latch(req string) string { return "redisson_unlock_latch:{" + p.name + "}:" + req }

// readUnlock runs RReadLock.unlock's script, then deletes the unlock latch
// as RedissonBaseLock.unlockInnerAsync does.
func (p rwJava) readUnlock(thread int) int64 {
	p.t.Helper()
	req := "req-r-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	r := p.unlockResult(p.rdb.Eval(context.Background(), javaReadUnlock,
		[]string{p.name, p.channel(), p.timeoutPrefix(thread), "{" + p.name + "}", p.latch(req)},
		0, p.field(thread), "publish", 3000).Result())
	p.rdb.Del(context.Background(), p.latch(req))
	return r
}

// writeUnlock runs RWriteLock.unlock's script, then deletes the latch.
func (p rwJava) writeUnlock(thread int) int64 {
	p.t.Helper()
	req := "req-w-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	r := p.unlockResult(p.rdb.Eval(context.Background(), javaWriteUnlock,
		[]string{p.name, p.channel(), p.latch(req)},
		1, 30000, p.field(thread)+":write", "publish", 3000).Result())
	p.rdb.Del(context.Background(), p.latch(req))
	return r
}

// rwCompat starts a server and returns it, its admin client, a Java peer
// on name, and a Go Client WithRedissonCompat (more options appended). The
// Go Client is the harness's least-privilege user (FamilyCommands and
// FamilyChannels: the hash commands and Redisson's channels redisson_*).
func rwCompat(t *testing.T, name string, opts ...dlock.Option) (*testserver.Redis, *redis.Client, rwJava, *dlock.Client) {
	t.Helper()
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	c := newClient(t, srv.Client(), append([]dlock.Option{dlock.WithRedissonCompat(rwGoID)}, opts...)...)
	return srv, admin, rwJava{t: t, rdb: admin, name: name}, c
}

// goField is the owner field of the n-th handle of the Go Client.
func goField(n int) string { return rwGoID + ":go-" + strconv.Itoa(n) }

func goTimeoutKey(name string, handle, i int) string {
	return "{" + name + "}:" + goField(handle) + ":rwlock_timeout:" + strconv.Itoa(i)
}

// hashIs checks that key is a hash with exactly want, and a PTTL in (0, max].
func hashIs(t testing.TB, admin *redis.Client, key string, want map[string]string, max time.Duration) {
	t.Helper()
	ctx := context.Background()
	if typ := admin.Type(ctx, key).Val(); typ != "hash" {
		t.Fatalf("%s is a %q, want a hash", key, typ)
	}
	got := admin.HGetAll(ctx, key).Val()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", key, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v", key, got, want)
		}
	}
	if ttl := admin.PTTL(ctx, key).Val(); ttl <= 0 || ttl > max {
		t.Fatalf("%s PTTL %v, want in (0, %v]", key, ttl, max)
	}
}

// timeoutKeyIs checks a rwlock_timeout key: the string "1" with PTTL in (0, max].
func timeoutKeyIs(t testing.TB, admin *redis.Client, key string, max time.Duration) {
	t.Helper()
	ctx := context.Background()
	if v, err := admin.Get(ctx, key).Result(); err != nil || v != "1" {
		t.Fatalf("timeout key %s = %q, %v; want \"1\"", key, v, err)
	}
	if ttl := admin.PTTL(ctx, key).Val(); ttl <= 0 || ttl > max {
		t.Fatalf("timeout key %s PTTL %v, want in (0, %v]", key, ttl, max)
	}
}

// keysOf lists the keys of the name's slot tag and the name itself, sorted
// out by the caller: every key the lock left behind.
func keysOf(t testing.TB, admin *redis.Client, name string) []string {
	t.Helper()
	ks := admin.Keys(context.Background(), "*"+name+"*").Val()
	return ks
}

// nextMessage waits for the next message on sub.
func nextMessage(t testing.TB, sub *redis.PubSub) *redis.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		m, err := sub.Receive(ctx)
		if err != nil {
			t.Fatalf("no message on Redisson's channel: %v", err)
		}
		if msg, ok := m.(*redis.Message); ok {
			return msg
		}
	}
}

func peerSubscribe(t testing.TB, admin *redis.Client, channel string) *redis.PubSub {
	t.Helper()
	sub := admin.Subscribe(context.Background(), channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(context.Background()); err != nil { // the confirmation
		t.Fatal(err)
	}
	return sub
}

// Go readers and Java readers share the lock; the state after the Go
// reader's RLock is Redisson's; neither side's writer gets in; the last
// reader's RUnlock deletes the hash and publishes "0".
func TestRedissonRWReadersShare(t *testing.T) {
	const name = "rrw:share"
	_, admin, java, c := rwCompat(t, name)
	ctx := ctxT(t)
	sub := peerSubscribe(t, admin, java.channel())

	r := c.NewRWMutex(name)
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	hashIs(t, admin, name, map[string]string{"mode": "read", goField(1): "1"}, lease)
	timeoutKeyIs(t, admin, goTimeoutKey(name, 1, 1), lease)
	if tok := admin.Get(ctx, "redisson_lock_token:{"+name+"}").Val(); tok != "1" || r.FencingToken() != 1 {
		t.Fatalf("fencing counter %q, token %d; want RFencedLock's counter at 1", tok, r.FencingToken())
	}
	if ks := keysOf(t, admin, name); len(ks) != 3 {
		t.Fatalf("keys after RLock: %v; want the hash, one timeout key and the counter", ks)
	}

	if ok, pttl := java.readLock(1, 30*time.Second); !ok {
		t.Fatalf("Java reader beside a Go reader refused (PTTL %d)", pttl)
	}
	hashIs(t, admin, name, map[string]string{"mode": "read", goField(1): "1", java.field(1): "1"}, 30*time.Second)
	if ok, _ := java.writeLock(2, 30*time.Second); ok {
		t.Fatal("Java writer got in beside readers")
	}
	w := c.NewRWMutex(name)
	if ok, err := w.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("Go writer beside readers: TryLock = %v, %v", ok, err)
	}
	r2 := c.NewRWMutex(name)
	if ok, err := r2.TryRLock(ctx, 0); !ok || err != nil {
		t.Fatalf("second Go reader: TryRLock = %v, %v", ok, err)
	}
	if err := r2.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}

	// The Go reader leaves first: the Java reader holds on, no message.
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if admin.HExists(ctx, name, goField(1)).Val() || admin.Exists(ctx, goTimeoutKey(name, 1, 1)).Val() != 0 {
		t.Fatal("the Go reader's field or timeout key survived its RUnlock")
	}
	hashIs(t, admin, name, map[string]string{"mode": "read", java.field(1): "1"}, 30*time.Second)
	// The Java reader leaves last: Redisson's script deletes the hash and publishes "0".
	if st := java.readUnlock(1); st != 1 {
		t.Fatalf("Java readUnlock = %d", st)
	}
	if m := nextMessage(t, sub); m.Payload != "0" {
		t.Fatalf("message %q, want \"0\"", m.Payload)
	}

	// And the other way round: Java first, the Go reader last publishes "0".
	if ok, _ := java.readLock(1, 30*time.Second); !ok {
		t.Fatal("Java reader refused on a free lock")
	}
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if st := java.readUnlock(1); st != 0 {
		t.Fatalf("Java readUnlock beside a Go reader = %d, want 0 (still held)", st)
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if m := nextMessage(t, sub); m.Payload != "0" || m.Channel != "redisson_rwlock:{"+name+"}" {
		t.Fatalf("message %q on %q, want \"0\" on Redisson's channel", m.Payload, m.Channel)
	}
	if ks := keysOf(t, admin, name); len(ks) != 1 {
		t.Fatalf("keys left: %v; want only the fencing counter", ks)
	}
}

// A Go writer excludes Java readers and writers; its state is Redisson's;
// its Unlock publishes "1" and lets the Java reader in.
func TestRedissonRWGoWriterExcludesJava(t *testing.T) {
	const name = "rrw:gowriter"
	_, admin, java, c := rwCompat(t, name)
	ctx := ctxT(t)
	sub := peerSubscribe(t, admin, java.channel())

	w := c.NewRWMutex(name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	hashIs(t, admin, name, map[string]string{"mode": "write", goField(1) + ":write": "1"}, lease)
	if ks := keysOf(t, admin, name); len(ks) != 2 {
		t.Fatalf("keys after Lock: %v; want the hash and the counter", ks)
	}
	if ok, pttl := java.readLock(1, 30*time.Second); ok || pttl <= 0 {
		t.Fatalf("Java reader beside a Go writer: acquired %v, PTTL %d", ok, pttl)
	}
	if ok, _ := java.writeLock(1, 30*time.Second); ok {
		t.Fatal("Java writer got in beside a Go writer")
	}
	if st := java.writeUnlock(1); st != -1 {
		t.Fatalf("Java writeUnlock of a lock it does not hold = %d, want nil", st)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if m := nextMessage(t, sub); m.Payload != "1" {
		t.Fatalf("message %q, want \"1\" (READ_UNLOCK_MESSAGE)", m.Payload)
	}
	if admin.Exists(ctx, name).Val() != 0 {
		t.Fatal("the hash survived the Go writer's Unlock")
	}
	if ok, _ := java.readLock(1, 30*time.Second); !ok {
		t.Fatal("Java reader refused after the Go writer left")
	}
}

// A Java writer excludes Go readers and writers; a waiting Go reader (10s
// constant backoff) is woken by the Java writer's unlock message "1", a
// waiting Go writer by the Java reader's "0".
func TestRedissonRWJavaWriterExcludesGoAndWakesIt(t *testing.T) {
	const name = "rrw:javawriter"
	_, admin, java, c := rwCompat(t, name, slowBackOff())
	ctx := ctxT(t)
	channel := java.channel()
	if ok, _ := java.writeLock(1, 30*time.Second); !ok {
		t.Fatal("Java writer refused on a free lock")
	}
	r := c.NewRWMutex(name)
	if ok, err := r.TryRLock(ctx, 0); ok || err != nil {
		t.Fatalf("Go reader beside a Java writer: TryRLock = %v, %v", ok, err)
	}
	w := c.NewRWMutex(name)
	if ok, err := w.TryLock(ctx, 50*time.Millisecond); ok || err != nil {
		t.Fatalf("Go writer beside a Java writer: TryLock = %v, %v", ok, err)
	}

	got := make(chan error, 1)
	go func() { got <- r.RLock(ctx) }()
	testserver.WaitFor(t, 5*time.Second, "the Go reader's subscription to Redisson's channel", func() bool {
		return admin.PubSubNumSub(ctx, channel).Val()[channel] > 0
	})
	start := time.Now()
	if st := java.writeUnlock(1); st != 1 {
		t.Fatalf("Java writeUnlock = %d", st)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Go reader was not woken by the Java writer's unlock message")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the Go reader took %v after the Java unlock: not woken by the message", d)
	}

	// Now a Java reader holds too; the Go writer waits for both readers.
	if ok, _ := java.readLock(1, 30*time.Second); !ok {
		t.Fatal("Java reader refused beside a Go reader")
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	got2 := make(chan error, 1)
	go func() { got2 <- w.Lock(ctx) }()
	testserver.WaitFor(t, 5*time.Second, "the Go writer's subscription", func() bool {
		return admin.PubSubNumSub(ctx, channel).Val()[channel] > 0
	})
	start = time.Now()
	if st := java.readUnlock(1); st != 1 {
		t.Fatalf("Java readUnlock = %d", st)
	}
	select {
	case err := <-got2:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Go writer was not woken by the Java reader's unlock message")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the Go writer took %v after the Java unlock", d)
	}
	if ok, _ := java.readLock(2, 30*time.Second); ok {
		t.Fatal("Java reader got in beside the Go writer")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A reentrant handle counts in Redis as Redisson does: each nested RLock
// HINCRBYs the field and adds a timeout key, each nested RUnlock counts down
// and deletes the highest; the write lock likewise, and "1" is published
// when the last write hold goes.
func TestRedissonRWReentrantState(t *testing.T) {
	const name = "rrw:reentrant"
	_, admin, java, c := rwCompat(t, name)
	ctx := ctxT(t)
	sub := peerSubscribe(t, admin, java.channel())
	r := c.NewRWMutex(name, dlock.WithReentrant())
	for range 3 {
		if err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hashIs(t, admin, name, map[string]string{"mode": "read", goField(1): "3"}, lease)
	for i := 1; i <= 3; i++ {
		timeoutKeyIs(t, admin, goTimeoutKey(name, 1, i), lease)
	}
	if r.HoldCount() != 3 || r.FencingToken() != 1 {
		t.Fatalf("HoldCount %d, token %d; want 3, 1", r.HoldCount(), r.FencingToken())
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	hashIs(t, admin, name, map[string]string{"mode": "read", goField(1): "2"}, lease)
	if admin.Exists(ctx, goTimeoutKey(name, 1, 3)).Val() != 0 {
		t.Fatal("the highest timeout key survived a nested RUnlock")
	}
	timeoutKeyIs(t, admin, goTimeoutKey(name, 1, 2), lease)
	// A Java peer's unlock of its own (absent) hold does not disturb ours.
	if st := java.readUnlock(1); st != -1 {
		t.Fatalf("Java readUnlock without a hold = %d, want nil", st)
	}
	for range 2 {
		if err := r.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if m := nextMessage(t, sub); m.Payload != "0" {
		t.Fatalf("message %q, want \"0\"", m.Payload)
	}
	if admin.Exists(ctx, name, goTimeoutKey(name, 1, 1), goTimeoutKey(name, 1, 2)).Val() != 0 {
		t.Fatal("keys survived the last RUnlock")
	}

	for range 2 {
		if err := r.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hashIs(t, admin, name, map[string]string{"mode": "write", goField(1) + ":write": "2"}, 2*lease)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	hashIs(t, admin, name, map[string]string{"mode": "write", goField(1) + ":write": "1"}, lease)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if m := nextMessage(t, sub); m.Payload != "1" {
		t.Fatalf("message %q, want \"1\"", m.Payload)
	}
	if admin.Exists(ctx, name).Val() != 0 {
		t.Fatal("the hash survived the last Unlock")
	}
}

// The Go watchdog keeps a read hold's hash and timeout key alive well past
// the lease, as Redisson's renewal does (renewing every owner's timeout keys,
// the Java reader's too); the write hold's hash likewise.
func TestRedissonRWWatchdogKeepsAlive(t *testing.T) {
	const name = "rrw:watchdog"
	_, admin, java, c := rwCompat(t, name)
	ctx := ctxT(t)
	r := c.NewRWMutex(name)
	if err := r.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := java.readLock(1, lease); !ok {
		t.Fatal("Java reader refused")
	}
	javaKey := java.timeoutPrefix(1) + ":1"
	end := time.Now().Add(4 * lease)
	for time.Now().Before(end) {
		hashIs(t, admin, name, map[string]string{"mode": "read", goField(1): "1", java.field(1): "1"}, lease)
		timeoutKeyIs(t, admin, goTimeoutKey(name, 1, 1), lease)
		timeoutKeyIs(t, admin, javaKey, lease)
		if !r.IsReadHeld() {
			t.Fatal("the Go read hold ended")
		}
		time.Sleep(20 * time.Millisecond) // sampling, not synchronisation
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if st := java.readUnlock(1); st != 1 {
		t.Fatalf("Java readUnlock = %d", st)
	}

	w := c.NewRWMutex(name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	end = time.Now().Add(4 * lease)
	for time.Now().Before(end) {
		hashIs(t, admin, name, map[string]string{"mode": "write", goField(2) + ":write": "1"}, lease)
		time.Sleep(20 * time.Millisecond) // sampling, not synchronisation
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// When the Lock context ends, the background release removes the owner's
// field and timeout keys and publishes Redisson's message; a deleted field is
// a loss (Done closes, Err matches ErrLockLost).
func TestRedissonRWBackgroundReleaseAndLoss(t *testing.T) {
	const name = "rrw:background"
	_, admin, java, c := rwCompat(t, name)
	ctx := ctxT(t)
	sub := peerSubscribe(t, admin, java.channel())

	lctx, cancel := context.WithCancel(ctx)
	r := c.NewRWMutex(name, dlock.WithReentrant())
	for range 2 {
		if err := r.RLock(lctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if m := nextMessage(t, sub); m.Payload != "0" {
		t.Fatalf("message %q, want \"0\"", m.Payload)
	}
	if n := admin.Exists(ctx, name, goTimeoutKey(name, 1, 1), goTimeoutKey(name, 1, 2)).Val(); n != 0 {
		t.Fatalf("%d keys survived the background release", n)
	}
	if err := r.RUnlock(ctx); err != nil {
		t.Fatalf("RUnlock after the context ended: %v", err)
	}

	w := c.NewRWMutex(name)
	if err := w.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.TryRLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryRLock beside a writer = %v, %v", ok, err)
	}
	if err := admin.HDel(ctx, name, goField(2)+":write").Err(); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(w.Done(), 2*time.Second) {
		t.Fatal("Done did not close after the write field was deleted")
	}
	if !errors.Is(w.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", w.Err())
	}
	if err := w.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after loss = %v, want ErrLockLost", err)
	}
}
