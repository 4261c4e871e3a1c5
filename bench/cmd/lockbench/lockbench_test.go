package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: every
// library instance must be closed by the benchmark.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitNoLeaks waits, up to a deadline, until goleak finds no stray
// goroutine: clients that stop asynchronously (rueidis's connection
// goroutines end shortly after Close returns) get time to finish, without a
// blind sleep. goleak.Find itself retries for about half a second.
func waitNoLeaks(t *testing.T, within time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	for {
		err := goleak.Find()
		if err == nil {
			t.Logf("no stray goroutine %v after the run", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines still running %v after the run: %v", within, err)
		}
	}
}

// TestQuickRun runs the whole program with -quick against its own
// redis-server and checks the report's shape, not its numbers.
func TestQuickRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	out := filepath.Join(t.TempDir(), "RESULTS.md")
	var stdout bytes.Buffer
	if err := run([]string{"lockbench", "-quick", "-out", out}, &stdout); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"stdout": stdout.String(), "RESULTS.md": string(file)} {
		for _, l := range []string{"dlock", "redsync", "redislock", "rueidislock"} {
			// One row per library in each of the four tables.
			if got := strings.Count(text, "\n| "+l+" |"); got != 4 {
				t.Errorf("%s: %d rows for %s, want 4", name, got, l)
			}
		}
		for _, want := range []string{"## Targets", "(a) ", "(b) ", "(c) ", "(d) ", "Command: `lockbench -quick -out "} {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
		if strings.Contains(text, "FAILED") {
			t.Errorf("%s reports a failure:\n%s", name, text)
		}
	}
	t.Logf("report:\n%s", stdout.String())
	waitNoLeaks(t, 10*time.Second)
}
