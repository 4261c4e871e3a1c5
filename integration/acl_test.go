package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// The least-privilege rule of README.md ("Least privilege (ACL)"): the
// harness creates testserver.LockUser with it on every server, and
// srv.Client() connects as that user, so the whole suite runs dlock with
// these rights and no more (the harness also fails any test whose server
// refused that user something). The tests here check that this is so, that
// a user without a part of the rule gets a clear error at once, and that
// every part of the rule is needed.

// aclUser creates user name on srv with the ACL rule (what follows the name
// in ACL SETUSER, password included) and returns a go-redis client that
// authenticates as it; opts adjust its options.
func aclUser(t testing.TB, srv *testserver.Redis, name, password string, rule []string, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	args := []any{"ACL", "SETUSER", name}
	for _, r := range rule {
		args = append(args, r)
	}
	if err := srv.Admin().Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", name, err)
	}
	return srv.Client(append([]func(*redis.Options){func(o *redis.Options) {
		o.Username, o.Password = name, password
	}}, opts...)...)
}

// without returns rule less the tokens drop.
func without(rule []string, drop ...string) []string {
	var out []string
	for _, tok := range rule {
		if !slices.Contains(drop, tok) {
			out = append(out, tok)
		}
	}
	return out
}

// aclRefusal is one entry of the server's ACL LOG.
type aclRefusal struct{ reason, context, object, user string }

// refusals returns the ACL LOG entries of user.
func refusals(t testing.TB, admin *redis.Client, user string) []aclRefusal {
	t.Helper()
	entries, err := admin.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatalf("ACL LOG: %v", err)
	}
	var out []aclRefusal
	for _, e := range entries {
		f := map[string]string{}
		switch e := e.(type) {
		case map[any]any:
			for k, v := range e {
				f[fmt.Sprint(k)] = fmt.Sprint(v)
			}
		case []any:
			for i := 0; i+1 < len(e); i += 2 {
				f[fmt.Sprint(e[i])] = fmt.Sprint(e[i+1])
			}
		}
		if f["username"] == user {
			out = append(out, aclRefusal{f["reason"], f["context"], f["object"], f["username"]})
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a logger and a test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The suite's dlock Clients really run as the restricted user: their
// connections are the lock user's, and a command outside the rule is refused.
func TestSuiteRunsAsLockUser(t *testing.T) {
	srv, admin, c := setup(t)
	srv.ExpectDenials() // this test sends refused commands as the lock user on purpose
	ctx := ctxT(t)
	m := c.NewMutex("lock:acl")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Every connection that ran a script (dlock's) belongs to the lock user.
	dlockConns := 0
	for _, line := range strings.Split(strings.TrimSpace(admin.ClientList(ctx).Val()), "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if f["cmd"] == "evalsha" || f["cmd"] == "eval" {
			dlockConns++
			if f["user"] != testserver.LockUser {
				t.Fatalf("a connection ran %s as %q, want %s: %s", f["cmd"], f["user"], testserver.LockUser, line)
			}
		}
	}
	if dlockConns == 0 {
		t.Fatal("no connection of dlock's in CLIENT LIST")
	}
	lockRdb := srv.Client()
	for _, cmd := range [][]any{
		{"FLUSHALL"}, {"KEYS", "*"}, {"CONFIG", "GET", "maxmemory"}, {"ACL", "WHOAMI"},
		{"SADD", "lock:acl", "v"}, {"SCRIPT", "FLUSH"}, {"CLIENT", "KILL", "TYPE", "pubsub"},
	} {
		err := lockRdb.Do(ctx, cmd...).Err()
		var rerr redis.Error
		if !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), "NOPERM") {
			t.Fatalf("%v as %s = %v, want NOPERM", cmd, testserver.LockUser, err)
		}
	}
	found := false
	for _, r := range refusals(t, admin, testserver.LockUser) {
		found = found || r.object == "flushall"
	}
	if !found {
		t.Fatalf("ACL LOG does not attribute the refused FLUSHALL to %s", testserver.LockUser)
	}
	if !m.IsHeld() {
		t.Fatalf("hold ended: %v", m.Err())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A user without a part of the rule gets, at once (no retry, no hang), an
// error that names the Redis refusal and the lock; nothing is left locked.
func TestMissingRightsFailFastWithClearError(t *testing.T) {
	const pass = "pw-missing"
	full := testserver.LockRule(pass, []string{"lock:*"})
	cases := []struct {
		name  string
		rule  []string
		lock  string
		flush bool                 // empty the script cache first
		opts  func(*redis.Options) // the application's go-redis options
		want  []string             // in the error message
	}{
		{name: "no EVALSHA", rule: without(full, "+evalsha"), lock: "lock:a",
			want: []string{"NOPERM", "'evalsha' command"}},
		{name: "no EVAL on an empty script cache", rule: without(full, "+eval"), lock: "lock:b", flush: true,
			want: []string{"NOPERM", "'eval' command"}},
		{name: "lock name outside the key patterns", rule: full, lock: "app:c",
			want: []string{"NOPERM", "keys"}},
		{name: "no fencing counters", rule: without(full, "~dlock:fence:*"), lock: "lock:d",
			want: []string{"NOPERM", "keys"}},
		{name: "no SET inside the script", rule: without(full, "+set"), lock: "lock:e",
			want: []string{"(NOPERM|can't run this command)"}},
		{name: "a client name without CLIENT SETNAME", rule: full, lock: "lock:f",
			opts: func(o *redis.Options) { o.ClientName = "app" },
			want: []string{"NOPERM", "'client\\|setname' command"}},
		{name: "a database number without SELECT", rule: full, lock: "lock:g",
			opts: func(o *redis.Options) { o.DB = 1 },
			want: []string{"NOPERM", "'select' command"}},
	}
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*redis.Options)
			if tc.opts != nil {
				opts = append(opts, tc.opts)
			}
			rdb := aclUser(t, srv, fmt.Sprintf("missing%d", i), pass, tc.rule, opts...)
			c := newClient(t, rdb)
			if tc.flush {
				if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			check := func(call string, err error, took time.Duration) {
				t.Helper()
				t.Logf("%s after %v: %v", call, took.Round(time.Millisecond), err)
				var rerr redis.Error
				switch {
				case err == nil:
					t.Fatalf("%s succeeded", call)
				case took > 2*time.Second:
					t.Fatalf("%s returned after %v: a refusal must not be retried", call, took)
				case !errors.As(err, &rerr):
					t.Fatalf("%s = %v, want a Redis error", call, err)
				case errors.Is(err, dlock.ErrNoScripting) || errors.Is(err, context.DeadlineExceeded):
					t.Fatalf("%s = %v, misclassified", call, err)
				case !strings.Contains(err.Error(), `"`+tc.lock+`"`):
					t.Fatalf("%s = %v, want the lock's name in it", call, err)
				}
				for _, w := range tc.want {
					if !regexp.MustCompile(w).MatchString(err.Error()) {
						t.Fatalf("%s = %v, want it to match %q", call, err, w)
					}
				}
			}
			// Lock with no deadline at all: a refusal must end it by itself.
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- c.NewMutex(tc.lock).Lock(context.Background()) }()
			select {
			case err := <-done:
				check("Lock", err, time.Since(start))
			case <-time.After(5 * time.Second):
				_ = c.Close() // ends the Lock call
				<-done
				t.Fatal("Lock hung on a refused command")
			}
			start = time.Now()
			ok, err := c.NewMutex(tc.lock).TryLock(ctxT(t), 10*time.Second)
			if ok {
				t.Fatal("TryLock acquired")
			}
			check("TryLock(10s)", err, time.Since(start))
			if n := admin.Exists(context.Background(), tc.lock).Val(); n != 0 {
				t.Fatalf("the refused Lock left %s behind", tc.lock)
			}
		})
	}
}

// A user whose channels do not cover the notices can still lock: its waiters
// find that they cannot subscribe, wait by backoff and the holder's PTTL, and
// acquire within a lease of the release. With WithoutPubSub nothing is
// refused at all.
func TestLockWithoutNoticeChannels(t *testing.T) {
	const pass = "pw-nochannels"
	rule := without(testserver.LockRule(pass, []string{"lock:*"}), "&dlock:notice:*")
	for _, pubsub := range []bool{true, false} {
		t.Run(fmt.Sprintf("pubsub=%v", pubsub), func(t *testing.T) {
			srv := testserver.StartRedis(t)
			admin := srv.Admin()
			logs := &syncBuffer{}
			logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			opts := []dlock.Option{dlock.WithLogger(logger)}
			if !pubsub {
				opts = append(opts, dlock.WithoutPubSub())
			}
			holderC := newClient(t, aclUser(t, srv, "nochan", pass, rule), opts...)
			waiterC := newClient(t, aclUser(t, srv, "nochan", pass, rule), opts...)
			ctx := ctxT(t)
			holder := holderC.NewMutex("lock:nochan")
			if err := holder.Lock(ctx); err != nil {
				t.Fatalf("Lock without channel rights: %v", err)
			}
			waiter := waiterC.NewMutex("lock:nochan")
			got := make(chan time.Time, 1)
			go func() {
				if err := waiter.Lock(ctx); err != nil {
					t.Error(err)
				}
				got <- time.Now()
			}()
			if pubsub {
				// The waiter tries to subscribe, is refused, and falls back to backoff.
				testserver.WaitFor(t, 5*time.Second, "the waiter to give up on pub/sub", func() bool {
					return strings.Contains(logs.String(), "pub/sub unavailable")
				})
			} else {
				time.Sleep(3 * renew) // the waiter polls
			}
			released := time.Now()
			uerr := holder.Unlock(ctx)
			select {
			case at := <-got:
				d := at.Sub(released)
				t.Logf("waiter acquired %v after the release (lease %v)", d.Round(time.Millisecond), lease)
				if d > lease+200*time.Millisecond {
					t.Fatalf("waiter acquired %v after the release, more than a lease (%v)", d, lease)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("waiter did not acquire after the release")
			}
			if !waiter.IsHeld() {
				t.Fatalf("waiter not holding: %v", waiter.Err())
			}
			// The release script deletes the key; a refused PUBLISH (a notice is
			// only a hint) does not make Unlock fail.
			if uerr != nil {
				t.Fatalf("holder's Unlock = %v", uerr)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatalf("waiter's Unlock = %v", err)
			}
			if n := admin.Exists(ctx, "lock:nochan").Val(); n != 0 {
				t.Fatal("the lock is still held after both Unlocks")
			}
			if !pubsub {
				if r := refusals(t, admin, "nochan"); len(r) != 0 {
					t.Fatalf("WithoutPubSub: Redis refused %+v", r)
				}
			}
		})
	}
}

// A server that lost its script cache (SCRIPT FLUSH; a restart or failover
// does the same) while locks are held: renewals and releases load the
// scripts again with the lock user's rights (the harness fails the test if
// the server refused it anything).
func TestScriptCacheFlushedWhileHolding(t *testing.T) {
	_, admin, c := setup(t)
	ctx := ctxT(t)
	m := c.NewMutex("lock:flushed")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * renew) // renewed at least once: the renew script is cached
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * renew) // renewals after the flush
	if !m.IsHeld() {
		t.Fatalf("hold lost after SCRIPT FLUSH: %v", m.Err())
	}
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after SCRIPT FLUSH: %v", err)
	}
	if admin.Exists(ctx, "lock:flushed").Val() != 0 {
		t.Fatal("key not released")
	}
}

// The rule in README.md is the one the harness runs the suite with.
func TestREADMEACLRuleMatchesHarness(t *testing.T) {
	readme := mustRead(t, "../README.md")
	_, section, ok := strings.Cut(readme, "\n## Least privilege (ACL)\n")
	if !ok {
		t.Fatal(`README.md has no "## Least privilege (ACL)" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, cmd, ok := strings.Cut(section, "redis-cli ACL SETUSER locker ")
	if !ok {
		t.Fatal("the section has no `redis-cli ACL SETUSER locker ...` command")
	}
	cmd, _, _ = strings.Cut(strings.ReplaceAll(cmd, "\\\n", " "), "\n")
	var got []string
	for _, f := range strings.Fields(cmd) {
		got = append(got, strings.Trim(f, `'"`))
	}
	want := testserver.LockRule("PASSWORD", []string{"lock:*"})
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("README's rule:\n  %v\nthe harness's (testserver.LockRule):\n  %v", got, want)
	}
	if !strings.Contains(readme, "\n## Least privilege (ACL)\n") ||
		strings.Index(readme, "\n## Least privilege (ACL)\n") > strings.Index(readme, "\n## What it cannot guarantee\n") {
		t.Fatal(`the ACL section must come right before "## What it cannot guarantee"`)
	}
}

// Every part of the rule is needed: a user without it is refused something
// (the server's ACL LOG names it) in a run that takes a lock on an empty
// script cache, finds a lock busy, waits for it on a notice, holds it across
// renewals, releases both, reads a lock's state and stays idle until its
// unused subscription is dropped. With the whole rule nothing is refused.
func TestEveryPartOfTheACLRuleIsNeeded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: takes ~12s (the notifier checks an idle subscription after 5s)")
	}
	const pass = "pw-part"
	full := testserver.LockRule(pass, []string{"lock:*"})
	parts := []string{""} // "": the whole rule
	for _, tok := range full {
		if strings.HasPrefix(tok, "+") || strings.HasPrefix(tok, "~") || strings.HasPrefix(tok, "&") {
			parts = append(parts, tok)
		}
	}
	var wg sync.WaitGroup
	for _, drop := range parts {
		name := "whole rule"
		if drop != "" {
			name = "without " + drop
		}
		wg.Add(1)
		go func() { // each on its own server, all at once: most of the time is idle waiting
			defer wg.Done()
			t.Run(name, func(t *testing.T) { exerciseRule(t, pass, without(full, drop), drop) })
		}()
	}
	wg.Wait()
}

// exerciseRule runs dlock as a user with rule until the server refuses it
// something, and checks that the refusal names drop (or, with drop empty,
// that nothing was refused).
func exerciseRule(t *testing.T, pass string, rule []string, drop string) {
	srv := testserver.StartRedis(t)
	admin := srv.Admin()
	const user = "part"
	rdb := aclUser(t, srv, user, pass, rule, func(o *redis.Options) { o.MaxRetries = -1 })
	uc := newClient(t, rdb)
	holderC := newClient(t, srv.Client())
	ctx := ctxT(t)
	const a, b = "lock:part:a", "lock:part:b"
	chB := noticeChannel(b)
	refused := func() []aclRefusal { return refusals(t, admin, user) }
	subscribers := func() int64 { return admin.PubSubNumSub(ctx, chB).Val()[chB] }
	var heldA *dlock.Mutex
	steps := []func(){
		func() { // a lock on an empty script cache: EVALSHA, then EVAL
			m := uc.NewMutex(a)
			if ok, _ := m.TryLock(ctx, 0); ok {
				heldA = m
			}
		},
		func() { // a busy lock, then a wait woken by the release notice
			hb := holderC.NewMutex(b)
			if err := hb.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			mb := uc.NewMutex(b)
			_, _ = mb.TryLock(ctx, 0)
			if len(refused()) > 0 {
				_ = hb.Unlock(ctx)
				return
			}
			done := make(chan bool, 1)
			go func() {
				ok, _ := mb.TryLock(ctx, 3*time.Second)
				done <- ok
			}()
			for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline) &&
				subscribers() == 0 && len(refused()) == 0; {
				time.Sleep(5 * time.Millisecond)
			}
			if err := hb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if <-done {
				time.Sleep(3 * renew) // renewals
				_ = mb.Unlock(ctx)
			}
		},
		func() { // renewals and release of the first lock, and the lock's state
			if heldA != nil {
				_ = heldA.Unlock(ctx)
			}
			_, _ = uc.NewMutex(a).Inspect(ctx)
		},
		func() { // idle: the notifier PINGs its connection and drops the unused channel
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) &&
				subscribers() > 0 && len(refused()) == 0; {
				time.Sleep(50 * time.Millisecond)
			}
			if drop == "" && subscribers() > 0 {
				t.Error("the idle subscription was not dropped within 15s")
			}
		},
	}
	for _, step := range steps {
		if step(); len(refused()) > 0 {
			break
		}
	}
	got := refused()
	if drop == "" {
		if len(got) > 0 {
			t.Fatalf("the whole rule, yet Redis refused %+v", got)
		}
		return
	}
	for _, r := range got {
		switch {
		case drop[0] == '+' && r.reason == "command" && r.object == drop[1:],
			drop[0] == '~' && r.reason == "key" && globMatch(drop[1:], r.object),
			drop[0] == '&' && r.reason == "channel" && globMatch(drop[1:], r.object):
			t.Logf("refused %s %s (%s)", r.reason, r.object, r.context)
			return
		}
	}
	t.Fatalf("without %s, Redis refused %+v: nothing that names it", drop, got)
}

func globMatch(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return ok && err == nil
}
