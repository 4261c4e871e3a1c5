package main

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example connects to the embedded Redis when REDIS_URL is unset, and
// refuses a bad URL with a clear error. (The story is tested in internal/demo.)
func TestConnect(t *testing.T) {
	rdb, where, stop, err := connect("")
	if err != nil || rdb == nil || where == "" {
		t.Fatalf("connect(\"\") = %v, %q, %v", rdb, where, err)
	}
	stop()
	if _, _, _, err := connect("not a url"); err == nil {
		t.Fatal("connect accepted a bad URL")
	}
}
