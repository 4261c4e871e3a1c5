package testserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Redis server started for a test and stopped when it ends. It
// has an ACL user, LockUser, with only the rights dlock needs: Client
// connects as that user, Admin as the default user with every right.
type Redis struct {
	// Addr is the server's host:port on loopback.
	Addr string

	tb   testing.TB
	bin  string // redis-server; empty for a container
	port int
	dir  string
	args []string

	tls      *tls.Config // non-nil: the server speaks TLS only (StartRedisTLS)
	tlsArgs  []string    // the TLS part of the command line
	password string      // LockUser's
	admin    string      // the default user's password (--requirepass), usually none

	mu        sync.Mutex
	cmd       *exec.Cmd
	out       *bytes.Buffer
	exited    chan error // receives the process's end
	denialsOK bool       // the test makes Redis refuse LockUser on purpose
}

// RequireRedis reports whether a missing Redis must fail the test.
func RequireRedis() bool { return os.Getenv("DLOCK_REQUIRE_REDIS") == "1" }

// StartRedis starts a fresh Redis for tb without persistence: a local
// redis-server with args added to its command line, or a container. Either
// way the server has the user LockUser (see Client and Admin).
func StartRedis(tb testing.TB, args ...string) *Redis {
	tb.Helper()
	if bin, err := exec.LookPath("redis-server"); err == nil {
		r := &Redis{tb: tb, bin: bin, dir: tb.TempDir(), args: args, admin: requirePass(args)}
		r.startFresh()
		return r
	}
	if dockerAnswers() {
		r := startContainer(tb, args)
		r.admin = requirePass(args)
		if err := r.createLockUser(); err != nil {
			tb.Fatalf("testserver: redis container: %v", err)
		}
		tb.Cleanup(r.checkDenials) // runs before the container's cleanup
		return r
	}
	msg := "no redis-server on PATH (apt-get install redis-server) and no Docker engine answering for testcontainers"
	if RequireRedis() {
		tb.Fatalf("DLOCK_REQUIRE_REDIS=1: %s", msg)
	}
	tb.Skip(msg)
	return nil
}

// Local reports whether the server is a process this package controls, which
// Kill, Restart, Pause and Resume need.
func (r *Redis) Local() bool { return r.bin != "" }

// RequireLocal skips (or under DLOCK_REQUIRE_REDIS fails) a test that needs
// to control the server process.
func (r *Redis) RequireLocal() {
	r.tb.Helper()
	if r.Local() {
		return
	}
	if RequireRedis() {
		r.tb.Fatal("DLOCK_REQUIRE_REDIS=1: this test needs a local redis-server process")
	}
	r.tb.Skip("this test needs a local redis-server process to stop and start")
}

// startFresh starts the server on a free port, retrying when another process
// takes the port first.
func (r *Redis) startFresh() {
	r.tb.Helper()
	var last error
	for range 5 {
		r.port = freePort(r.tb)
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
		if last = r.start(); last == nil {
			r.tb.Cleanup(r.Kill)
			return
		}
	}
	r.tb.Fatalf("testserver: redis-server did not start: %v", last)
}

func (r *Redis) start() error {
	argv := []string{"--port", strconv.Itoa(r.port)}
	if r.tls != nil {
		argv = append([]string{"--port", "0", "--tls-port", strconv.Itoa(r.port)}, r.tlsArgs...)
	}
	argv = append(append(argv,
		"--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir,
		"--daemonize", "no", "--protected-mode", "no",
	), r.args...)
	cmd := exec.Command(r.bin, argv...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ping(r.Addr, r.tls) == nil {
			if err := r.createLockUser(); err != nil {
				_ = cmd.Process.Kill()
				<-exited
				return fmt.Errorf("%v: %s", err, out.String())
			}
			r.mu.Lock()
			r.cmd, r.out, r.exited = cmd, out, exited
			r.mu.Unlock()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited (%v): %s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("no answer on %s within 10s: %s", r.Addr, out.String())
}

// Kill stops the server at once with SIGKILL, losing every key. Before
// that it fails the test if the server refused LockUser anything (see
// ExpectDenials).
func (r *Redis) Kill() {
	r.mu.Lock()
	running := r.cmd != nil
	r.mu.Unlock()
	if running {
		r.checkDenials()
	}
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited // SIGKILL cannot be caught or ignored, even by a stopped process
}

// Restart starts the server again on the same port, empty.
func (r *Redis) Restart() {
	r.tb.Helper()
	r.RequireLocal()
	r.Kill()
	var err error
	for range 50 { // the port may linger for a moment
		if err = r.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.tb.Fatalf("testserver: restart on %s: %v", r.Addr, err)
}

// Pause freezes the server with SIGSTOP: connections stay open, nothing answers.
func (r *Redis) Pause() { r.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (r *Redis) Resume() { r.signal(syscall.SIGCONT) }

func (r *Redis) signal(sig syscall.Signal) {
	r.tb.Helper()
	r.RequireLocal()
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if cmd == nil {
		r.tb.Fatalf("testserver: %v to a server that is not running", sig)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		r.tb.Fatalf("testserver: %v: %v", sig, err)
	}
}

// Client returns a go-redis client for the server that authenticates as
// LockUser, with only the rights dlock needs: give it to dlock. It is closed
// when the test ends; opts, if given, adjusts its options first (another
// Username and Password connect as another user).
func (r *Redis) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: r.Addr, Username: LockUser, Password: r.password, TLSConfig: r.tlsConfig()}
	return r.newClient(o, opts)
}

// Admin returns a go-redis client for the server as the default user, with
// every right: for what a test does to Redis itself (reading and stealing
// keys, FLUSHALL, SCRIPT FLUSH, CLIENT KILL, INFO, CONFIG, PUBSUB, ...),
// which LockUser may not do. It is closed when the test ends; opts, if
// given, adjusts its options first.
func (r *Redis) Admin(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: r.Addr, Password: r.admin, TLSConfig: r.tlsConfig()}
	return r.newClient(o, opts)
}

func (r *Redis) newClient(o *redis.Options, opts []func(*redis.Options)) *redis.Client {
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	r.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// adminOptions are the options of the harness's own full-rights connections.
func (r *Redis) adminOptions() *redis.Options {
	return &redis.Options{Addr: r.Addr, Password: r.admin, TLSConfig: r.tlsConfig()}
}

// tlsConfig returns a copy of the client TLS configuration, nil without TLS.
func (r *Redis) tlsConfig() *tls.Config {
	if r.tls == nil {
		return nil
	}
	return r.tls.Clone()
}

// requirePass returns the default user's password when args set one.
func requirePass(args []string) string {
	pass := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--requirepass" {
			pass = args[i+1]
		}
	}
	return pass
}

// Log returns what the server has printed (local servers only).
func (r *Redis) Log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		return ""
	}
	return r.out.String()
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testserver: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ping sends one PING over a plain connection, or a TLS one when cfg is not
// nil, and expects +PONG (or -NOAUTH from a server that wants a password:
// it answers all the same).
func ping(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 200 * time.Millisecond}
	var conn net.Conn
	var err error
	if cfg != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, cfg)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// WaitFor polls cond every few milliseconds until it holds or timeout passes,
// then fails the test with msg. It is how tests wait for a condition instead
// of sleeping a guessed time.
func WaitFor(tb testing.TB, timeout time.Duration, msg string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for: %s", timeout, msg)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ctxTimeout is the bound on the harness's own calls.
func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}
