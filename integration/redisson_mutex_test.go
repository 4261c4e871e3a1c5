package integration

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// A Java service on Redisson, played from Redisson's published data model:
// the scripts below are those of RedissonLock (tryLockInnerAsync,
// unlockInnerAsync without its idempotency latch, renewExpirationAsync) and
// RedissonFencedLock (tryLockInnerAsync with its token), sent as Redisson
// sends them, with Redisson's arguments.
const (
	javaClientID = "5df8512c-e096-4359-bc82-07efb0bc9d8e" // Redisson's connection-manager id
	goClientID   = "9b2f4d1e-8c3a-4e5f-a6b7-c8d9e0f1a2b3"

	javaTryLock = `if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ` +
		`redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; ` +
		`return redis.call('pttl', KEYS[1]);`
	javaFencedTryLock = `if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then ` +
		`local token = redis.call('incr', KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); ` +
		`redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; return {redis.call('pttl', KEYS[1]), -1};`
	javaUnlock = `if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; ` +
		`local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); ` +
		`if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; ` +
		`else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end;`
	javaRenew = `if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;`
)

// javaPeer is one Redisson client on the admin connection.
type javaPeer struct {
	t   testing.TB
	rdb *redis.Client
}

func (p javaPeer) field(thread int) string { return javaClientID + ":" + strconv.Itoa(thread) }

// tryLock runs RLock.tryLock's script for thread with lease: true when
// acquired (the script answered nil), else false and the PTTL it answered.
func (p javaPeer) tryLock(name string, thread int, lease time.Duration) (bool, int64) {
	p.t.Helper()
	v, err := p.rdb.Eval(context.Background(), javaTryLock, []string{name}, lease.Milliseconds(), p.field(thread)).Result()
	if errors.Is(err, redis.Nil) {
		return true, 0
	}
	if err != nil {
		p.t.Fatalf("java tryLock: %v", err)
	}
	return false, v.(int64)
}

// fencedTryLock runs RFencedLock's script: the token when acquired, else -1.
func (p javaPeer) fencedTryLock(name string, thread int, lease time.Duration) int64 {
	p.t.Helper()
	v, err := p.rdb.Eval(context.Background(), javaFencedTryLock, []string{name, "redisson_lock_token:{" + name + "}"},
		lease.Milliseconds(), p.field(thread)).Slice()
	if err != nil {
		p.t.Fatalf("java fenced tryLock: %v", err)
	}
	if v[0].(int64) != -1 {
		return -1
	}
	return v[1].(int64)
}

// unlock runs RLock.unlock's script: 1 released (and published "0"), 0
// counted down, -1 not the owner (Redisson throws IllegalMonitorStateException).
func (p javaPeer) unlock(name string, thread int) int64 {
	p.t.Helper()
	v, err := p.rdb.Eval(context.Background(), javaUnlock, []string{name, "redisson_lock__channel:{" + name + "}"},
		"0", 30000, p.field(thread), "publish").Result()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	if err != nil {
		p.t.Fatalf("java unlock: %v", err)
	}
	return v.(int64)
}

func (p javaPeer) renew(name string, thread int, lease time.Duration) int64 {
	p.t.Helper()
	v, err := p.rdb.Eval(context.Background(), javaRenew, []string{name}, lease.Milliseconds(), p.field(thread)).Int64()
	if err != nil {
		p.t.Fatalf("java renew: %v", err)
	}
	return v
}

func redissonClient(t *testing.T, srv *testserver.Redis, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	return newClient(t, srv.Client(), append([]dlock.Option{dlock.WithRedissonCompat(goClientID)}, opts...)...)
}

// What a Go hold writes is what Redisson writes: the hash at the name with
// the field "<clientID>:<ownerID>" holding the hold count, the lease as the
// key's TTL, Redisson's fencing counter, and on the last unlock "0" on
// redisson_lock__channel:{name}, once. A reentrant handle's count adds up in
// the field. Owner ids are stable per handle, distinct between handles, and
// never a number (Java's thread ids are).
func TestRedissonMutexLayout(t *testing.T) {
	srv, admin, _ := setup(t)
	c := redissonClient(t, srv)
	ctx := ctxT(t)
	const name = "redisson:layout"
	sub := admin.Subscribe(ctx, "redisson_lock__channel:{"+name+"}")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	m := c.NewMutex(name, dlock.WithReentrant())
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if typ := admin.Type(ctx, name).Val(); typ != "hash" {
		t.Fatalf("TYPE %s = %s, want hash", name, typ)
	}
	fields := admin.HGetAll(ctx, name).Val()
	if len(fields) != 1 {
		t.Fatalf("hash %v, want one owner field", fields)
	}
	var field string
	for f, v := range fields {
		field = f
		if v != "1" {
			t.Fatalf("hold count %q, want 1", v)
		}
	}
	owner, ok := strings.CutPrefix(field, goClientID+":")
	if !ok || owner == "" {
		t.Fatalf("field %q is not <clientID>:<ownerID>", field)
	}
	if _, err := strconv.ParseInt(owner, 10, 64); err == nil {
		t.Fatalf("owner id %q is a number: it could collide with a Java thread id", owner)
	}
	if d := admin.PTTL(ctx, name).Val(); d <= 0 || d > lease {
		t.Fatalf("PTTL %v, want the lease %v", d, lease)
	}
	if tok := admin.Get(ctx, "redisson_lock_token:{"+name+"}").Val(); tok != strconv.FormatInt(m.FencingToken(), 10) {
		t.Fatalf("redisson_lock_token = %q, FencingToken = %d", tok, m.FencingToken())
	}
	// Reentry counts in the field.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := admin.HGet(ctx, name, field).Val(); v != "2" {
		t.Fatalf("count after reentry %q, want 2", v)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := admin.HGet(ctx, name, field).Val(); v != "1" {
		t.Fatalf("count after one unlock %q, want 1", v)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if admin.Exists(ctx, name).Val() != 0 {
		t.Fatal("hash left after the last unlock")
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "0" {
		t.Fatalf("message %v, %v; want Redisson's unlock message 0", msg, err)
	}
	// One message only: the count-down published nothing.
	if m, err := sub.ReceiveTimeout(ctx, 200*time.Millisecond); err == nil {
		t.Fatalf("a second message %v", m)
	}

	// The owner id is the handle's, and another handle has another.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if admin.HGet(ctx, name, field).Val() != "1" {
		t.Fatal("a new hold of the same handle uses another field")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := c.NewMutex(name)
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if f := admin.HKeys(ctx, name).Val(); len(f) != 1 || f[0] == field {
		t.Fatalf("second handle's fields %v: not its own", f)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// The Go side and a Java peer exclude each other both ways, and each wakes
// the other's waiter: a Go waiter (10s backoff) is woken by the peer's
// unlock message, and the peer, subscribed like Redisson, gets Go's.
func TestRedissonMutexExcludesJavaPeer(t *testing.T) {
	srv, admin, _ := setup(t)
	c := redissonClient(t, srv, slowBackOff(), dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second))
	ctx := ctxT(t)
	java := javaPeer{t: t, rdb: admin}
	const name = "redisson:peer"

	if ok, _ := java.tryLock(name, 1, 30*time.Second); !ok {
		t.Fatal("java could not lock a free name")
	}
	m := c.NewMutex(name)
	if ok, err := m.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("Go TryLock while Java holds = %v, %v", ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- m.Lock(ctx) }()
	testserver.WaitFor(t, 5*time.Second, "the Go waiter's subscription to Redisson's channel", func() bool {
		return admin.PubSubNumSub(ctx, "redisson_lock__channel:{"+name+"}").Val()["redisson_lock__channel:{"+name+"}"] > 0
	})
	released := time.Now()
	if st := java.unlock(name, 1); st != 1 {
		t.Fatalf("java unlock = %d", st)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Go waiter not woken by the Java unlock message")
	}
	if d := time.Since(released); d > 500*time.Millisecond {
		t.Fatalf("Go waiter took %v after the Java unlock", d)
	}

	// Now Go holds: Java is refused with the PTTL, and woken by Go's unlock.
	if ok, pttl := java.tryLock(name, 2, 30*time.Second); ok || pttl <= 0 {
		t.Fatalf("java tryLock while Go holds = %v, PTTL %d", ok, pttl)
	}
	if st := java.unlock(name, 2); st != -1 {
		t.Fatalf("java unlock of a lock it does not hold = %d, want refused", st)
	}
	sub := admin.Subscribe(ctx, "redisson_lock__channel:{"+name+"}")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("java peer received %v, %v", msg, err)
	}
	if ok, _ := java.tryLock(name, 2, 30*time.Second); !ok {
		t.Fatal("java could not lock after Go's unlock")
	}
}

// The peer's renewals keep a Go waiter waiting; when the peer stops, the
// lease runs out and Go gets the lock.
func TestRedissonMutexPeerRenewalKeepsGoWaiting(t *testing.T) {
	srv, admin, _ := setup(t)
	c := redissonClient(t, srv)
	ctx := ctxT(t)
	java := javaPeer{t: t, rdb: admin}
	const name = "redisson:renew"
	const javaLease = 400 * time.Millisecond
	if ok, _ := java.tryLock(name, 1, javaLease); !ok {
		t.Fatal("java could not lock")
	}
	stop := make(chan struct{})
	renewed := make(chan int, 1)
	go func() { // Redisson's watchdog: renew every lease/3
		n := 0
		tick := time.NewTicker(javaLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				renewed <- n
				return
			case <-tick.C:
				if java.renew(name, 1, javaLease) == 1 {
					n++
				}
			}
		}
	}()
	m := c.NewMutex(name)
	ok, err := m.TryLock(ctx, 3*javaLease)
	close(stop)
	n := <-renewed
	if ok || err != nil {
		t.Fatalf("Go TryLock through the peer's renewals = %v, %v", ok, err)
	}
	if n < 3 {
		t.Fatalf("the peer renewed %d times while Go waited", n)
	}
	// The peer stops renewing (a crashed JVM): Go gets the lock after its lease.
	if ok, err := m.TryLock(ctx, 3*javaLease); !ok || err != nil {
		t.Fatalf("Go TryLock after the peer stopped = %v, %v", ok, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Fencing tokens from both sides come from one counter, Redisson's
// redisson_lock_token:{name}, and strictly increase across them.
func TestRedissonMutexFencingSharedWithJava(t *testing.T) {
	srv, admin, _ := setup(t)
	c := redissonClient(t, srv)
	ctx := ctxT(t)
	java := javaPeer{t: t, rdb: admin}
	const name = "redisson:fence"
	m := c.NewMutex(name)
	var last int64
	for round := range 3 {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if m.FencingToken() <= last {
			t.Fatalf("round %d: Go token %d not above %d", round, m.FencingToken(), last)
		}
		last = m.FencingToken()
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		tok := java.fencedTryLock(name, 1, 30*time.Second)
		if tok <= last {
			t.Fatalf("round %d: Java token %d not above %d", round, tok, last)
		}
		last = tok
		if java.unlock(name, 1) != 1 {
			t.Fatal("java unlock")
		}
	}
}

// A Go hold whose field is removed (the hash deleted by an operator, or taken
// over) is reported lost at its next renewal; Inspect and ForceUnlock read
// and delete Redisson's hash, and ForceUnlock announces it as Redisson does.
func TestRedissonMutexLossInspectForceUnlock(t *testing.T) {
	srv, admin, _ := setup(t)
	c := redissonClient(t, srv)
	ctx := ctxT(t)
	java := javaPeer{t: t, rdb: admin}
	const name = "redisson:loss"
	m := c.NewMutex(name)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := m.Inspect(ctx)
	if err != nil || !st.Locked || st.TTL <= 0 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	admin.Del(ctx, name)
	if ok, _ := java.tryLock(name, 1, time.Minute); !ok {
		t.Fatal("java could not take the deleted lock")
	}
	if !closedWithin(m.Done(), 2*lease) || !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("loss not reported: %v", m.Err())
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the loss = %v", err)
	}
	if v := admin.HGet(ctx, name, java.field(1)).Val(); v != "1" {
		t.Fatalf("Java's field touched: %q", v)
	}
	sub := admin.Subscribe(ctx, "redisson_lock__channel:{"+name+"}")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.NewMutex(name).ForceUnlock(ctx); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
		t.Fatalf("ForceUnlock announced %v, %v", msg, err)
	}
	admin.Set(ctx, name, "not a lock", time.Minute)
	if _, err := c.NewMutex(name).ForceUnlock(ctx); !errors.Is(err, dlock.ErrWrongType) {
		t.Fatalf("ForceUnlock of a string = %v", err)
	}
	if err := c.NewMutex(name).Lock(ctx); !errors.Is(err, dlock.ErrWrongType) {
		t.Fatalf("Lock on a string = %v", err)
	}
}

func TestRedissonCompatRejectsEmptyID(t *testing.T) {
	srv := testserver.StartRedis(t)
	if _, err := dlock.New(srv.Client(), dlock.WithRedissonCompat("")); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("New with an empty client id = %v", err)
	}
	if _, err := dlock.NewRedlock([]redis.UniversalClient{srv.Client()}, dlock.WithRedissonCompat(goClientID)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("NewRedlock with Redisson compat = %v", err)
	}
}
