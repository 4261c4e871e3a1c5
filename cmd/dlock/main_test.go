package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"go.uber.org/goleak"
)

// bin is the dlock binary built for the tests.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlock-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "dlock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building dlock: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// result is a finished dlock process.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// start starts dlock with args; the environment has no REDIS_URL.
func start(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "REDIS_URL=", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &stdout, &stderr
}

// wait waits (at most 60s) for a started dlock and returns how it ended.
func wait(t *testing.T, cmd *exec.Cmd, stdout, stderr *bytes.Buffer, began time.Time) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("dlock %v did not finish within 60s; stderr: %s", cmd.Args[1:], stderr)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), took: time.Since(began)}
}

// dlockRun runs dlock with args to the end.
func dlockRun(t *testing.T, args ...string) result {
	t.Helper()
	began := time.Now()
	cmd, out, errb := start(t, args...)
	return wait(t, cmd, out, errb, began)
}

func redisURL(srv *testserver.Redis) string { return "redis://" + srv.Addr }

// Two concurrent `dlock run` of a script that writes start and end marks to a
// file never interleave.
func TestRunNeverInterleaves(t *testing.T) {
	srv := testserver.StartRedis(t)
	marks := filepath.Join(t.TempDir(), "marks")
	script := fmt.Sprintf(`echo "start $$" >> %[1]s; sleep 0.2; echo "end $$" >> %[1]s`, marks)
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = dlockRun(t, "run", "--redis", redisURL(srv), "--watchdog-timeout", "3s", "cli:marks", "--", "sh", "-c", script)
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.code != 0 {
			t.Fatalf("dlock run exited %d: %s", r.code, r.stderr)
		}
	}
	data, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2*len(results) {
		t.Fatalf("%d marks, want %d:\n%s", len(lines), 2*len(results), data)
	}
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if s[0] != "start" || e[0] != "end" || s[1] != e[1] {
			t.Fatalf("interleaved critical sections:\n%s", data)
		}
	}
}

// A lost lock stops the command (SIGTERM to its process group) and dlock exits
// 79 with a one-line reason.
func TestRunLostLockStopsCommand(t *testing.T) {
	srv := testserver.StartRedis(t)
	rdb := srv.Admin()
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	script := fmt.Sprintf(`trap 'echo TERM > %s; exit 3' TERM; touch %s; while :; do sleep 0.05; done`, got, ready)
	began := time.Now()
	cmd, out, errb := start(t, "run", "--redis", redisURL(srv), "--watchdog-timeout", "600ms", "cli:lost", "--", "sh", "-c", script)
	testserver.WaitFor(t, 10*time.Second, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
	stolen := time.Now()
	if err := rdb.Set(context.Background(), "cli:lost", "00000000-0000-4000-8000-000000000000", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r := wait(t, cmd, out, errb, began)
	if r.code != exitLost {
		t.Fatalf("exit %d, want %d (lost); stderr: %s", r.code, exitLost, r.stderr)
	}
	if took := time.Since(stolen); took > 5*time.Second {
		t.Fatalf("the loss stopped the command %v after the theft", took)
	}
	var own []string // dlock's lines; the rest is the command's ("Terminated" from sh)
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if strings.HasPrefix(l, "dlock") {
			own = append(own, l)
		}
	}
	if len(own) != 1 || !strings.Contains(own[0], "lost") {
		t.Fatalf("dlock's stderr is not one line naming the loss: %q", r.stderr)
	}
	if b, err := os.ReadFile(got); err != nil || strings.TrimSpace(string(b)) != "TERM" {
		t.Fatalf("the command did not get SIGTERM: %q, %v", b, err)
	}
	if v := rdb.Get(context.Background(), "cli:lost").Val(); v != "00000000-0000-4000-8000-000000000000" {
		t.Fatalf("dlock touched the new holder's key: %q", v)
	}
}

// A command that ignores SIGTERM is killed after --kill-after.
func TestRunLostLockKillsAfterGrace(t *testing.T) {
	srv := testserver.StartRedis(t)
	ready := filepath.Join(t.TempDir(), "ready")
	script := fmt.Sprintf(`trap '' TERM; touch %s; while :; do sleep 0.05; done`, ready)
	began := time.Now()
	cmd, out, errb := start(t, "run", "--redis", redisURL(srv), "--lease", "500ms", "--kill-after", "300ms", "cli:kill", "--", "sh", "-c", script)
	r := wait(t, cmd, out, errb, began)
	if r.code != exitLost {
		t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitLost, r.stderr)
	}
	if r.took < 800*time.Millisecond {
		t.Fatalf("finished after %v: before the lease (500ms) plus the grace (300ms)", r.took)
	}
}

// SIGTERM and SIGINT to dlock reach the command; dlock exits with the
// command's status and releases the lock after it exits.
func TestRunForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			srv := testserver.StartRedis(t)
			rdb := srv.Admin()
			dir := t.TempDir()
			ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
			script := fmt.Sprintf(`trap 'echo %[3]s > %[1]s; exit 42' %[3]s; touch %[2]s; while :; do sleep 0.05; done`,
				got, ready, strings.TrimPrefix(strings.ToUpper(sigName(sig)), "SIG"))
			began := time.Now()
			cmd, out, errb := start(t, "run", "--redis", redisURL(srv), "cli:signals", "--", "sh", "-c", script)
			testserver.WaitFor(t, 10*time.Second, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			r := wait(t, cmd, out, errb, began)
			if r.code != 42 {
				t.Fatalf("exit %d, want the command's 42; stderr: %s", r.code, r.stderr)
			}
			if b, _ := os.ReadFile(got); !strings.Contains(string(b), strings.TrimPrefix(sigName(sig), "SIG")) {
				t.Fatalf("the command did not get %v", sig)
			}
			if rdb.Exists(context.Background(), "cli:signals").Val() != 0 {
				t.Fatal("lock not released after the command exited")
			}
		})
	}
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGINT:
		return "INT"
	}
	return s.String()
}

// A signal while waiting for the lock stops the wait; the command never runs.
func TestRunSignalWhileWaiting(t *testing.T) {
	srv := testserver.StartRedis(t)
	holdLock(t, srv, "cli:waiting")
	marker := filepath.Join(t.TempDir(), "ran")
	began := time.Now()
	cmd, out, errb := start(t, "run", "--redis", redisURL(srv), "cli:waiting", "--", "touch", marker)
	testserver.WaitFor(t, 10*time.Second, "dlock to wait (subscribed to the lock's notices)", func() bool {
		return len(srv.Admin().PubSubChannels(context.Background(), "dlock:notice:*").Val()) > 0
	})
	_ = cmd.Process.Signal(syscall.SIGINT)
	r := wait(t, cmd, out, errb, began)
	if r.code != 128+int(syscall.SIGINT) {
		t.Fatalf("exit %d, want %d; stderr: %s", r.code, 128+int(syscall.SIGINT), r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran without the lock")
	}
}

// holdLock holds name through the library until the test ends.
func holdLock(t *testing.T, srv *testserver.Redis, name string) {
	t.Helper()
	c, err := dlock.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.NewMutex(name).Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRunNotAcquired(t *testing.T) {
	srv := testserver.StartRedis(t)
	holdLock(t, srv, "cli:busy")
	r := dlockRun(t, "run", "--redis", redisURL(srv), "--wait", "0", "cli:busy", "--", "true")
	if r.code != exitNotAcquired || !strings.Contains(r.stderr, "not acquired") {
		t.Fatalf("--wait 0: exit %d, stderr %q; want %d", r.code, r.stderr, exitNotAcquired)
	}
	r = dlockRun(t, "run", "--redis", redisURL(srv), "--wait", "300ms", "cli:busy", "--", "true")
	if r.code != exitNotAcquired || r.took < 300*time.Millisecond {
		t.Fatalf("--wait 300ms: exit %d after %v; want %d after 300ms", r.code, r.took, exitNotAcquired)
	}
}

func TestRunStatusesAndEnvironment(t *testing.T) {
	srv := testserver.StartRedis(t)
	url := redisURL(srv)
	r := dlockRun(t, "run", "--redis", url, "cli:env", "--", "sh", "-c", `echo "$DLOCK_NAME $DLOCK_FENCING_TOKEN"; exit 7`)
	if r.code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr %s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`^cli:env [1-9][0-9]+\n$`).MatchString(r.stdout) {
		t.Fatalf("environment: %q", r.stdout)
	}
	if r := dlockRun(t, "run", "--redis", url, "cli:env", "--", "sh", "-c", "kill -9 $$"); r.code != 128+9 {
		t.Fatalf("killed command: exit %d, want 137", r.code)
	}
	if r := dlockRun(t, "run", "--redis", url, "cli:env", "--", "no-such-command-dlock"); r.code != exitNotFound {
		t.Fatalf("missing command: exit %d, want %d", r.code, exitNotFound)
	}
	if r := dlockRun(t, "run", "--redis", "redis://127.0.0.1:1", "cli:env", "--", "true"); r.code != exitUnavailable {
		t.Fatalf("unreachable Redis: exit %d, want %d", r.code, exitUnavailable)
	}
	if r := dlockRun(t, "run", "--redis", url, "cli:env"); r.code != exitUsage {
		t.Fatalf("no command: exit %d, want %d", r.code, exitUsage)
	}
	srv.Admin().HSet(context.Background(), "cli:hash", "f", "v")
	if r := dlockRun(t, "run", "--redis", url, "cli:hash", "--", "true"); r.code != exitDataErr {
		t.Fatalf("foreign key: exit %d, want %d; stderr %s", r.code, exitDataErr, r.stderr)
	}
	if srv.Admin().Exists(context.Background(), "cli:env").Val() != 0 {
		t.Fatal("a finished run left its lock behind")
	}
}

func TestStatusAndForceUnlock(t *testing.T) {
	srv := testserver.StartRedis(t)
	url := redisURL(srv)
	holdLock(t, srv, "cli:held")
	r := dlockRun(t, "status", "--redis", url, "cli:held", "cli:free")
	if r.code != 0 || !regexp.MustCompile(`cli:held\tlocked\tttl [0-9.]+s\tlast fencing token [1-9]`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "cli:free\tfree") {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = dlockRun(t, "status", "--json", "--redis", url, "cli:held", "cli:free")
	var st []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st) != 2 || !st[0].Locked || st[0].TTLMillis <= 0 || st[1].Locked {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if r := dlockRun(t, "unlock", "--redis", url, "cli:held"); r.code != exitUsage || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("unlock without --force: exit %d, stderr %q", r.code, r.stderr)
	}
	r = dlockRun(t, "unlock", "--force", "--redis", url, "cli:held")
	if r.code != 0 || !strings.Contains(r.stdout, `deleted lock "cli:held"`) || !strings.Contains(r.stdout, "left") {
		t.Fatalf("unlock --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = dlockRun(t, "unlock", "--force", "--redis", url, "cli:held")
	if r.code != 0 || !strings.Contains(r.stdout, "not held; nothing deleted") {
		t.Fatalf("second unlock --force: exit %d\n%s", r.code, r.stdout)
	}
	srv.Admin().HSet(context.Background(), "cli:hash", "f", "v")
	if r := dlockRun(t, "unlock", "--force", "--redis", url, "cli:hash"); r.code != exitDataErr ||
		srv.Admin().HGet(context.Background(), "cli:hash", "f").Val() != "v" {
		t.Fatalf("unlock of a hash: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, c := range []string{"run", "status", "unlock", "demo"} {
		r := dlockRun(t, c, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: dlock "+c) || !strings.Contains(r.stdout, "Examples:") {
			t.Fatalf("dlock %s --help: exit %d\n%s", c, r.code, r.stdout)
		}
	}
	if r := dlockRun(t, "--help"); r.code != 0 || !strings.Contains(r.stdout, "Exit statuses:") {
		t.Fatalf("dlock --help: exit %d\n%s", r.code, r.stdout)
	}
	if r := dlockRun(t, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "dlock ") {
		t.Fatalf("dlock --version: exit %d %q", r.code, r.stdout)
	}
	if r := dlockRun(t, "frobnicate"); r.code != exitUsage {
		t.Fatalf("unknown command: exit %d", r.code)
	}
	if r := dlockRun(t, "run", "--wait", "-1s", "x", "--", "true"); r.code != exitUsage {
		t.Fatalf("negative --wait: exit %d", r.code)
	}
}

// The README's table of exit statuses is the one dlock prints and uses.
func TestExitStatusesMatchREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range exitTable {
		want := fmt.Sprintf("| %s | %s |", row[0], row[1])
		if !strings.Contains(string(readme), want) {
			t.Errorf("README lacks the exit status row %q", want)
		}
	}
	for code, meaning := range map[int]string{exitUsage: "usage", exitDataErr: "not a dlock lock", exitUnavailable: "Redis unreachable",
		exitNotAcquired: "not acquired", exitLost: "lost", exitCannotExec: "could not be started", exitNotFound: "not found"} {
		found := false
		for _, row := range exitTable {
			found = found || (row[0] == fmt.Sprint(code) && strings.Contains(row[1], meaning))
		}
		if !found {
			t.Errorf("exit status %d (%s) is not in the table", code, meaning)
		}
	}
}

// The demo tells its story, in plain text when piped.
func TestDemoPlainWhenPiped(t *testing.T) {
	r := dlockRun(t, "demo", "--lease", "300ms")
	if r.code != 0 {
		t.Fatalf("demo: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"lock:order:1001", "shipped order 1001", "already shipped", "lock lost", "REJECTED", "Shipped once"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Fatal("piped demo output has ANSI colour")
	}
	if r := dlockRun(t, "demo", "--lease", "300ms", "--color", "always"); !strings.Contains(r.stdout, "\x1b[") {
		t.Fatal("--color always has no colour")
	}
}

// The demo on a real redis-server.
func TestDemoOnRedis(t *testing.T) {
	srv := testserver.StartRedis(t)
	if r := dlockRun(t, "demo", "--lease", "300ms", "--redis", redisURL(srv)); r.code != 0 || !strings.Contains(r.stdout, "REJECTED") {
		t.Fatalf("demo --redis: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
