package dlock_test

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// BenchmarkLockUnlock measures one uncontended Lock+Unlock cycle on a real
// redis-server (the cross-library comparison lives in ./bench).
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.StartRedis(b)
	c, err := dlock.New(srv.Client())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m := c.NewMutex("bench:lock")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
