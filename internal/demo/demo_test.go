package demo

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

func checkStory(t *testing.T, res Result, out string) {
	t.Helper()
	t.Log("\n" + out)
	if res.Shipped != 1 || res.Skipped != 1 || res.Rejected != 1 {
		t.Fatalf("shipped %d, skipped %d, rejected %d; want 1 each", res.Shipped, res.Skipped, res.Rejected)
	}
	if res.ShippedBy == res.Stalled || res.Stalled == "" {
		t.Fatalf("shipped by %q, stalled %q: the stalled worker must not ship", res.ShippedBy, res.Stalled)
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
	res, err := Run(ctx, srv.Client(), Options{Lease: 300 * time.Millisecond, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	checkStory(t, res, out.String())
	if strings.Contains(out.String(), "\x1b[") {
		t.Fatal("plain output contains ANSI escapes")
	}
}

// The story on the embedded Redis, in colour.
func TestStoryOnEmbeddedRedisInColour(t *testing.T) {
	rdb, stop, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := Run(ctx, rdb, Options{Lease: 300 * time.Millisecond, Out: &out, Color: true})
	if err != nil {
		t.Fatal(err)
	}
	checkStory(t, res, out.String())
	if !strings.Contains(out.String(), "\x1b[1;31m") {
		t.Fatal("coloured output has no red for the rejection")
	}
}
