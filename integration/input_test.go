package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/google/uuid"
)

// A key that holds data dlock did not write is reported with its name, and
// neither locking, unlocking nor ForceUnlock touches it.
func TestForeignDataIsReportedAndLeftAlone(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	rdb.HSet(ctx, "orders:hash", "a", "1")
	rdb.RPush(ctx, "orders:list", "x")
	rdb.Set(ctx, "orders:string", "not a token", 0)
	for _, name := range []string{"orders:hash", "orders:list", "orders:string"} {
		m := c.NewMutex(name)
		err := m.Lock(ctx)
		if !errors.Is(err, dlock.ErrWrongType) || !strings.Contains(err.Error(), name) {
			t.Fatalf("Lock(%s) = %v, want ErrWrongType naming the key", name, err)
		}
		if ok, err := m.TryLock(ctx, time.Second); ok || !errors.Is(err, dlock.ErrWrongType) {
			t.Fatalf("TryLock(%s) = %v, %v", name, ok, err)
		}
		if ok, err := m.ForceUnlock(ctx); ok || !errors.Is(err, dlock.ErrWrongType) {
			t.Fatalf("ForceUnlock(%s) = %v, %v", name, ok, err)
		}
		if _, err := m.IsLocked(ctx); !errors.Is(err, dlock.ErrWrongType) {
			t.Fatalf("IsLocked(%s) = %v", name, err)
		}
		if _, err := m.ForceUnlock(ctx); name == "orders:hash" && !strings.Contains(err.Error(), "hash") {
			t.Fatalf("ForceUnlock(%s) = %v, want the type named", name, err)
		}
	}
	if rdb.HGet(ctx, "orders:hash", "a").Val() != "1" || rdb.LLen(ctx, "orders:list").Val() != 1 ||
		rdb.Get(ctx, "orders:string").Val() != "not a token" || rdb.TTL(ctx, "orders:string").Val() != -1 {
		t.Fatal("foreign data was modified")
	}
}

func TestNameWithHashTagsAndBinary(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	for _, name := range []string{"{user:1}:lock", "a{}b", "ünïcødé🔒", "bin\x00ary\xff", strings.Repeat("x", 64<<10)} {
		m := c.NewMutex(name)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock(%.20q): %v", name, err)
		}
		if rdb.Exists(ctx, name).Val() != 1 {
			t.Fatalf("key %.20q not set", name)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServerWithoutScripting(t *testing.T) {
	srv := testserver.StartRedis(t, "--rename-command", "EVAL", "", "--rename-command", "EVALSHA", "")
	c := newClient(t, srv.Client())
	ctx := ctxT(t)
	err := c.NewMutex("lock:noscript").Lock(ctx)
	if !errors.Is(err, dlock.ErrNoScripting) {
		t.Fatalf("Lock = %v, want ErrNoScripting", err)
	}
	if _, err := c.NewMutex("lock:noscript").TryLock(ctx, time.Second); !errors.Is(err, dlock.ErrNoScripting) {
		t.Fatalf("TryLock = %v, want ErrNoScripting at once", err)
	}
}

func TestForceUnlock(t *testing.T) {
	srv, rdb, c := setup(t)
	other := newClient(t, srv.Client())
	ctx := ctxT(t)
	m := c.NewMutex("lock:force")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ok, err := other.NewMutex("lock:force").ForceUnlock(ctx)
	if !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	if rdb.Exists(ctx, "lock:force").Val() != 0 {
		t.Fatal("key not deleted")
	}
	if !closedWithin(m.Done(), renew+time.Second) || !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("holder not told: Err = %v", m.Err())
	}
	if ok, err := other.NewMutex("lock:force").ForceUnlock(ctx); ok || err != nil {
		t.Fatalf("ForceUnlock of a free lock = %v, %v", ok, err)
	}
	// On the holder's own handle the loss is immediate.
	m2 := c.NewMutex("lock:force2")
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := m2.ForceUnlock(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if !isClosed(m2.Done()) || !errors.Is(m2.Err(), dlock.ErrLockLost) {
		t.Fatal("own ForceUnlock did not end the hold")
	}
}

func TestInspectAndTTL(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:inspect", dlock.WithLeaseTime(10*time.Second))
	if ttl, err := m.TTL(ctx); ttl != 0 || err != nil {
		t.Fatalf("TTL of a free lock = %v, %v", ttl, err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ttl, err := m.TTL(ctx)
	if err != nil || ttl <= 9*time.Second || ttl > 10*time.Second {
		t.Fatalf("TTL = %v, %v", ttl, err)
	}
	s, err := m.Inspect(ctx)
	if err != nil || !s.Locked || s.LastFencingToken < m.FencingToken() {
		t.Fatalf("Inspect = %+v, %v (token %d)", s, err, m.FencingToken())
	}
	rdb.Persist(ctx, "lock:inspect")
	if ttl, _ := m.TTL(ctx); ttl != dlock.NoExpiry {
		t.Fatalf("TTL without expiry = %v, want NoExpiry", ttl)
	}
	_ = m.Unlock(ctx)
}

// go-redis may retry an acquire whose reply was lost: the retry finds its own
// token and is granted, with a new, larger fencing token.
func TestAcquireRetryWithSameTokenIsGranted(t *testing.T) {
	_, rdb, _ := setup(t)
	ctx := ctxT(t)
	src := scriptSource(t, "acquire")
	tok := uuid.NewString()
	first, err := rdb.Eval(ctx, src, []string{"lock:retry", "dlock:fence:{x}"}, tok, 1000).Int64()
	if err != nil || first <= 0 {
		t.Fatalf("first = %v, %v; want a fencing token", first, err)
	}
	again, err := rdb.Eval(ctx, src, []string{"lock:retry", "dlock:fence:{x}"}, tok, 1000).Int64()
	if err != nil || again <= first {
		t.Fatalf("retry = %v, %v; want granted with a larger token than %v", again, err, first)
	}
	busy, err := rdb.Eval(ctx, src, []string{"lock:retry", "dlock:fence:{x}"}, uuid.NewString(), 1000).Int64()
	if pttl := -1 - busy; err != nil || pttl <= 0 || pttl > 1000 {
		t.Fatalf("other token = %v, %v; want busy: -1 - PTTL", busy, err)
	}
}

func TestBadInputOnCalls(t *testing.T) {
	_, _, c := setup(t)
	ctx := ctxT(t)
	empty := c.NewMutex("")
	if err := empty.Lock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "name") {
		t.Fatalf("Lock with empty name = %v", err)
	}
	if err := empty.Unlock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("Unlock with empty name = %v", err)
	}
	if err := c.NewMutex("dlock:fence:{0}").Lock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "reserves") {
		t.Fatalf("Lock of a fencing counter's key = %v, want ErrInvalidArgument", err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		m := c.NewMutex("lock:bad", dlock.WithLeaseTime(d))
		if err := m.Lock(ctx); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "lease") {
			t.Fatalf("Lock with lease %v = %v", d, err)
		}
	}
	if _, err := c.NewMutex("lock:bad").TryLock(ctx, -time.Second); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("TryLock with negative wait = %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := c.NewMutex("lock:bad").Lock(nil); !errors.Is(err, dlock.ErrInvalidArgument) { //nolint:staticcheck
		t.Fatalf("Lock(nil) = %v", err)
	}
	if err := c.WithLock(ctx, "lock:bad", nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("WithLock with nil fn = %v", err)
	}
	_ = context.Background
}
