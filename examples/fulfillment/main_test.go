package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func checkStory(t *testing.T, res result, out string) {
	t.Helper()
	t.Log("\n" + out)
	if res.shipped != 1 || res.skipped != 1 || res.rejected != 1 {
		t.Fatalf("shipped %d, skipped %d, rejected %d; want 1 each", res.shipped, res.skipped, res.rejected)
	}
	if res.shippedBy == res.stalled || res.stalled == "" {
		t.Fatalf("shipped by %q, stalled %q: the stalled worker must not ship", res.shippedBy, res.stalled)
	}
	if !strings.Contains(out, "lock lost") || !strings.Contains(out, "REJECTED") {
		t.Fatal("timeline does not show the loss and the rejected write")
	}
}

// The story on a real redis-server.
func TestStoryOnRedisServer(t *testing.T) {
	srv := testserver.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := run(ctx, srv.Client(), &out, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	checkStory(t, res, out.String())
}

// The story on the embedded Redis that `go run` uses without REDIS_URL.
func TestStoryOnEmbeddedRedis(t *testing.T) {
	rdb, _, stop, err := connect("")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := run(ctx, rdb, &out, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	checkStory(t, res, out.String())
}
