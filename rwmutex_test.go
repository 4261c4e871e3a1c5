package dlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Bad input never panics: every call on the handle reports ErrInvalidArgument.
func TestRWMutexBadInput(t *testing.T) {
	c, _, _ := newMini(t)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rl, err := NewRedlock([]redis.UniversalClient{rdb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.Close() })
	var nilClient *Client
	ctx := context.Background()
	for name, rw := range map[string]*RWMutex{
		"nil client":     nilClient.NewRWMutex("x"),
		"empty name":     c.NewRWMutex(""),
		"reserved name":  c.NewRWMutex("dlock:readers:x"),
		"bad lease":      c.NewRWMutex("x", WithLeaseTime(0)),
		"redlock client": rl.NewRWMutex("x"),
	} {
		if err := rw.RLock(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: RLock: %v", name, err)
		}
		if err := rw.Lock(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: Lock: %v", name, err)
		}
		if err := rw.RUnlock(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: RUnlock: %v", name, err)
		}
		if err := rw.Err(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: Err: %v", name, err)
		}
	}
	rw := c.NewRWMutex("x")
	var nilCtx context.Context
	if err := rw.RLock(nilCtx); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil ctx: %v", err)
	}
	if _, err := rw.TryLock(ctx, -time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative wait: %v", err)
	}
	if _, err := rw.TryRLock(ctx, -time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative wait: %v", err)
	}
	if err := rw.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Unlock of nothing: %v", err)
	}
}

// The scripts on miniredis: readers share, a refused writer leaves its
// intent, which keeps new readers out until the writer has come and gone.
func TestRWMutexScriptsOnMiniredis(t *testing.T) {
	c, mr, _ := newMini(t)
	ctx := context.Background()
	r1, r2, r3 := c.NewRWMutex("doc"), c.NewRWMutex("doc"), c.NewRWMutex("doc")
	w := c.NewRWMutex("doc")
	for _, r := range []*RWMutex{r1, r2} {
		if err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r1.FencingToken() <= 0 || r2.FencingToken() <= r1.FencingToken() {
		t.Fatalf("fencing tokens %d, %d", r1.FencingToken(), r2.FencingToken())
	}
	readerToken := r2.FencingToken()
	if ok, err := w.TryLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryLock beside readers = %v, %v", ok, err)
	}
	// The refused writer withdrew its intent as it gave up.
	if mr.Exists(derivedKey("wwait", "doc")) {
		t.Fatal("intent left behind by a writer that gave up")
	}
	// A live intent of another writer keeps new readers out.
	if err := mr.Set(derivedKey("wwait", "doc"), newToken()); err != nil {
		t.Fatal(err)
	}
	mr.SetTTL(derivedKey("wwait", "doc"), time.Minute)
	if ok, err := r3.TryRLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryRLock beside an intent = %v, %v", ok, err)
	}
	mr.Del(derivedKey("wwait", "doc"))
	for _, r := range []*RWMutex{r1, r2} {
		if err := r.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := w.TryLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryLock on a free lock = %v, %v", ok, err)
	}
	if w.FencingToken() <= readerToken {
		t.Fatal("writer's token not above the readers'")
	}
	if ok, err := r3.TryRLock(ctx, 0); ok || err != nil {
		t.Fatalf("TryRLock beside a writer = %v, %v", ok, err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := r3.TryRLock(ctx, 0); !ok || err != nil {
		t.Fatalf("TryRLock after Unlock = %v, %v", ok, err)
	}
	if err := r3.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
}
