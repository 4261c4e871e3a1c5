package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Some tests need lock holders in other OS processes (to stop them with
// SIGSTOP, or to contend from several processes). They run this test binary
// again with DLOCK_CHILD set: init runs the child's role and exits before any
// test or TestMain runs, so a child never counts as a test.
func init() {
	role := os.Getenv("DLOCK_CHILD")
	if role == "" {
		return
	}
	var err error
	switch role {
	case "pause":
		err = pauseChild()
	case "soak":
		err = soakChild()
	default:
		err = fmt.Errorf("unknown DLOCK_CHILD role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child is a running child process whose stdout is read line by line.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

// startChild runs this test binary as a child with role and the extra
// environment env; the child is killed when the test ends.
func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "DLOCK_CHILD="+role), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
		for range c.lines { // let the reader finish
		}
	})
	return c
}

// expect waits (at most d) for a line starting with prefix and returns it.
func (c *child) expect(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before printing %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timer.C:
			t.Fatalf("child did not print %q within %v", prefix, d)
		}
	}
}

// wait waits (at most d) for the child to exit and returns its status.
func (c *child) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
		return c.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		_ = c.cmd.Process.Kill()
		<-done
		t.Fatalf("child did not exit within %v", d)
		return -1
	}
}

// childEnv reads a required environment variable of a child.
func childEnv(name string) string {
	v := os.Getenv(name)
	if v == "" {
		panic("child: " + name + " is not set")
	}
	return v
}

// childCtx bounds a child's whole run: it stops by itself.
func childCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Minute)
}
