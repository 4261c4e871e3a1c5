package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// uuidPattern matches a token as dlock sends it (a UUID v4 string).
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

// tokenSpy records every token-shaped argument dlock sends to Redis: the
// tokens of every acquisition, renewal and release, including those whose
// key the test never gets to read.
type tokenSpy struct {
	mu     sync.Mutex
	tokens map[string]bool
}

func (s *tokenSpy) record(cmd redis.Cmder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range cmd.Args() {
		if v, ok := a.(string); ok && uuidPattern.MatchString(v) && len(v) == 36 {
			s.tokens[v] = true
		}
	}
}

func (s *tokenSpy) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *tokenSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.record(cmd)
		return next(ctx, cmd)
	}
}
func (s *tokenSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			s.record(c)
		}
		return next(ctx, cmds)
	}
}

// Tokens (random, from crypto/rand) and the Redis password never appear in
// dlock's logs, at any level, debug included: a Client logging everything
// as JSON, on a server that requires a password (the harness's ACL user),
// goes through locking, unlocking, a waiter woken by a notice, a stolen and
// a deleted key, renewal trouble and recovery, a lease lost to a frozen
// server, an acquire whose reply was lost (cleaned up in the background),
// Close with locks held, and a wrong password.
func TestSecretsNeverLogged(t *testing.T) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	user, password := srv.LockUser()
	ctx := ctxT(t)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	spy := &tokenSpy{tokens: map[string]bool{}}
	tokens := map[string]bool{} // read from the keys by the admin client
	read := func(name string) {
		t.Helper()
		v, err := admin.Get(ctx, name).Result()
		if err != nil || len(v) != 36 {
			t.Fatalf("GET %s = %q, %v", name, v, err)
		}
		tokens[v] = true
	}
	client := func(opts ...dlock.Option) *dlock.Client {
		rdb := srv.Client(func(o *redis.Options) {
			o.MaxRetries = -1
			o.ReadTimeout = 100 * time.Millisecond
			o.WriteTimeout = 100 * time.Millisecond
		})
		rdb.AddHook(spy)
		return newClient(t, rdb, append([]dlock.Option{dlock.WithLogger(logger)}, opts...)...)
	}
	c, other := client(), client()

	// Lock and Unlock.
	m := c.NewMutex("lock:secret:plain")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	read("lock:secret:plain")
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A waiter woken by the release notice.
	h := other.NewMutex("lock:secret:wait")
	if err := h.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	read("lock:secret:wait")
	w := c.NewMutex("lock:secret:wait")
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	ch := noticeChannel("lock:secret:wait")
	testserver.WaitFor(t, 5*time.Second, "the waiter's subscription", func() bool {
		return admin.PubSubNumSub(ctx, ch).Val()[ch] > 0
	})
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	read("lock:secret:wait")
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A stolen key and a deleted key: losses.
	for _, steal := range []bool{true, false} {
		name := fmt.Sprintf("lock:secret:lost:%v", steal)
		m := c.NewMutex(name)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		read(name)
		if steal {
			admin.Set(ctx, name, uuid.NewString(), time.Minute)
		} else {
			admin.Del(ctx, name)
		}
		if !closedWithin(m.Done(), time.Second) {
			t.Fatalf("%s: loss not reported", name)
		}
		if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("Unlock after the loss = %v", err)
		}
	}

	// An acquire whose reply is lost: the caller gets an error, the key is
	// deleted in the background.
	lossy := srv.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	lossy.AddHook(spy)
	lossy.AddHook(&loseFirstEvalReply{})
	lc := newClient(t, lossy, dlock.WithLogger(logger), dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second))
	if ok, err := lc.NewMutex("lock:secret:unknown").TryLock(ctx, 0); ok || err == nil {
		t.Fatalf("TryLock with a lost reply = %v, %v", ok, err)
	}
	testserver.WaitFor(t, 5*time.Second, "the orphaned key to be deleted", func() bool {
		n, err := admin.Exists(ctx, "lock:secret:unknown").Result()
		return err == nil && n == 0
	})

	if srv.Local() {
		// Renewal trouble: a server frozen for less than a lease; renewals
		// time out, are retried, and recover.
		tc := client(dlock.WithWatchdogTimeout(3*time.Second), dlock.WithRenewInterval(200*time.Millisecond))
		m := tc.NewMutex("lock:secret:trouble")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		read("lock:secret:trouble")
		srv.Pause()
		time.Sleep(600 * time.Millisecond) // renewals fail meanwhile
		srv.Resume()
		testserver.WaitFor(t, 5*time.Second, "renewals to recover", func() bool {
			return strings.Contains(logs.String(), "renewal recovered")
		})
		if !m.IsHeld() {
			t.Fatalf("hold lost to a short freeze: %v", m.Err())
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		// A lease lost to a server frozen for longer than it.
		m = c.NewMutex("lock:secret:frozen")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		read("lock:secret:frozen")
		srv.Pause()
		lost := closedWithin(m.Done(), lease+time.Second)
		srv.Resume()
		if !lost {
			t.Fatal("loss not reported while the server was frozen")
		}
		_ = m.Unlock(ctx)
	} else {
		t.Log("a container: no freezes")
	}

	// Close with locks held releases them.
	closing := client()
	for i := range 3 {
		name := fmt.Sprintf("lock:secret:close:%d", i)
		if err := closing.NewMutex(name).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		read(name)
	}
	if err := closing.Close(); err != nil {
		t.Fatal(err)
	}

	// A wrong password: refused at once, and neither the error nor the logs
	// show it (it contains the right one).
	wrong := srv.Client(func(o *redis.Options) { o.Password = password + "-wrong" })
	wc := newClient(t, wrong, dlock.WithLogger(logger))
	err := wc.NewMutex("lock:secret:wrongpass").Lock(ctx)
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("Lock with a wrong password = %v, want WRONGPASS", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Fatalf("the error shows the password: %v", err)
	}

	_ = c.Close()
	_ = other.Close()
	_ = lc.Close()

	// Every token read from a key was also seen by the spy.
	spy.mu.Lock()
	for tok := range tokens {
		if !spy.tokens[tok] {
			t.Errorf("token %s read from a key was never sent by dlock", tok)
		}
		spy.tokens[tok] = true
	}
	all := spy.tokens
	spy.mu.Unlock()
	if len(all) < 10 {
		t.Fatalf("only %d tokens seen: the scenario did not run", len(all))
	}

	out := logs.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	levels := map[string]int{}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %d is not JSON: %v: %s", i, err, line)
		}
		levels[fmt.Sprint(rec["level"])]++
		if strings.Contains(line, password) {
			t.Errorf("the password appears in a log record: %s", line)
		}
		for tok := range all {
			if strings.Contains(line, tok) || strings.Contains(line, strings.ReplaceAll(tok, "-", "")) {
				t.Errorf("token %s appears in a log record: %s", tok, line)
			}
		}
		if uuidPattern.MatchString(line) {
			t.Errorf("a token-shaped value appears in a log record: %s", line)
		}
	}
	t.Logf("%d log records by level %v; %d tokens checked; user %s", len(lines), levels, len(all), user)
	if testing.Verbose() {
		t.Log(out)
	}
	for _, want := range []string{"dlock: acquired", "dlock: released", "dlock: lock lost", "dlock: acquire failed, retrying"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q record: the scenario missed a logging path", want)
		}
	}
	if srv.Local() && !strings.Contains(out, "renewal failed") {
		t.Error(`no "renewal failed" record: the freeze did not disturb renewals`)
	}
	if levels["DEBUG"] == 0 || levels["WARN"] == 0 || levels["INFO"] == 0 {
		t.Errorf("log levels seen: %v; want DEBUG, INFO and WARN records", levels)
	}
}
