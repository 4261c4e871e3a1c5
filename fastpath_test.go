package dlock

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flavor emulates, over miniredis, the native commands of a newer server:
// a go-redis hook answers them from miniredis's data the way the server
// documents, and counts them. Commands of a kind the flavor lacks are refused
// as Redis 7 does: SET ... IFEQ and DELIFEQ go on to miniredis, which answers
// a syntax error and an unknown command; DELEX, which miniredis has, the hook
// refuses as an unknown command.
type flavor struct {
	mr                      *miniredis.Miniredis
	setIfeq, delex, delifeq bool

	mu     sync.Mutex
	refuse bool           // answer the native commands NOPERM, as an ACL would
	calls  map[string]int // native commands answered, by name
}

func (f *flavor) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// answer handles cmd if it is a native command the flavor has.
func (f *flavor) answer(cmd redis.Cmder) bool {
	args := cmd.Args()
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = strings.ToLower(toString(a))
	}
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return false
	}
	name := s[0]
	if name == "delex" && !f.delex {
		c.SetErr(redisError("ERR unknown command 'delex', with args beginning with: "))
		return true
	}
	switch {
	case name == "set" && len(s) == 7 && s[3] == "ifeq" && s[5] == "px" && f.setIfeq:
	case name == "delex" && len(s) == 4 && s[2] == "ifeq" && f.delex:
	case name == "delifeq" && len(s) == 3 && f.delifeq:
	default:
		return false
	}
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
	refuse := f.refuse
	f.mu.Unlock()
	if refuse {
		c.SetErr(redisError("NOPERM User locker has no permissions to run the '" + name + "' command"))
		return true
	}
	key := toString(args[1])
	cur, err := f.mr.Get(key)
	switch name {
	case "set":
		if err != nil || cur != toString(args[4]) {
			c.SetErr(redis.Nil)
			return true
		}
		ms, _ := strconv.Atoi(toString(args[6]))
		f.mr.Set(key, toString(args[2]))
		f.mr.SetTTL(key, time.Duration(ms)*time.Millisecond)
		c.SetVal("OK")
	case "delex", "delifeq":
		want := toString(args[len(args)-1])
		if err != nil || cur != want {
			c.SetVal(int64(0))
			return true
		}
		f.mr.Del(key)
		c.SetVal(int64(1))
	}
	return true
}

func toString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	}
	return ""
}

// redisError is a reply error as go-redis reports one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func (f *flavor) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *flavor) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.answer(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (f *flavor) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if !f.answer(cmd) {
				_ = next(ctx, []redis.Cmder{cmd})
			}
		}
		return nil
	}
}

// newFlavored returns a Client on miniredis dressed as flavor f.
func newFlavored(t *testing.T, f *flavor, opts ...Option) (*Client, *redis.Client) {
	t.Helper()
	f.mr = miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr()})
	rdb.AddHook(f)
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, rdb
}

func TestProbeFindsWhatEachServerAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *flavor
		want caps
	}{
		{"redis 7 (miniredis)", &flavor{}, caps{}},
		{"redis 8.4", &flavor{setIfeq: true, delex: true}, caps{setIfeq: true, delex: true}},
		{"valkey 8.1", &flavor{setIfeq: true}, caps{setIfeq: true}},
		{"valkey 9.0", &flavor{setIfeq: true, delifeq: true}, caps{setIfeq: true, delifeq: true}},
		// A least-privilege user without the new commands: the scripts.
		{"refused by ACL", &flavor{setIfeq: true, delex: true, refuse: true}, caps{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := newFlavored(t, tc.f)
			got, answered := probe(context.Background(), rdb)
			require.True(t, answered)
			assert.Equal(t, tc.want, *got)
			// The probe never writes its key.
			assert.False(t, tc.f.mr.Exists(probeKey))
		})
	}
}

// miniredis reports redis_version 8.4 (or whatever it claims) yet refuses
// SET ... IFEQ: the probe trusts answers, never version strings.
func TestProbeIgnoresVersionString(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	got, answered := probe(context.Background(), rdb)
	require.True(t, answered)
	assert.Equal(t, caps{}, *got)
}

func TestProbeUnansweredIsNotKept(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	got, answered := probe(context.Background(), rdb)
	assert.False(t, answered)
	assert.Equal(t, caps{}, *got)
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestRenewArgs(t *testing.T) {
	assert.Equal(t, []any{"set", "k", "tok", "ifeq", "tok", "px", leaseArg(1500 * time.Millisecond)},
		renewArgs("k", "tok", 1500*time.Millisecond))
	assert.Equal(t, "1500", toString(leaseArg(1500*time.Millisecond)))
}

func TestRefusedNative(t *testing.T) {
	for _, err := range []error{
		redisError("ERR unknown command 'delex', with args beginning with: "),
		redisError("ERR syntax error"),
		redisError("ERR wrong number of arguments for 'delifeq' command"),
		redisError("NOPERM User locker has no permissions to run the 'delex' command"),
	} {
		assert.True(t, refusedNative(err), err.Error())
	}
	for _, err := range []error{nil, redis.Nil, errors.New("dial tcp: connection refused"), redisError("LOADING")} {
		assert.False(t, refusedNative(err), "%v", err)
	}
}

// On each flavor, Lock, renewals and Unlock use what the server has: SET
// IFEQ renews, DELEX or DELIFEQ releases, and a token that is not ours is
// neither extended nor deleted.
func TestFastPathsUsedWhereTheServerHasThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *flavor
		del  string
	}{
		{"redis 8.4", &flavor{setIfeq: true, delex: true}, "delex"},
		{"valkey 9.0", &flavor{setIfeq: true, delifeq: true}, "delifeq"},
		{"valkey 8.1", &flavor{setIfeq: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newFlavored(t, tc.f, WithWatchdogTimeout(300*time.Millisecond), WithRenewInterval(50*time.Millisecond))
			ctx := context.Background()
			m := c.NewMutex("fast:a")
			require.NoError(t, m.Lock(ctx))
			probes := tc.f.count("set") // the probe's own SET IFEQ
			waitFor(t, "renewals by SET IFEQ", func() bool { return tc.f.count("set") >= probes+3 })
			assert.True(t, m.IsHeld())
			require.NoError(t, m.Unlock(ctx))
			assert.False(t, tc.f.mr.Exists("fast:a"))
			if tc.del != "" {
				// The probe's delete plus the release.
				assert.Equal(t, 2, tc.f.count(tc.del))
			}

			// Another token: the native release deletes nothing.
			m2 := c.NewMutex("fast:b")
			require.NoError(t, m2.Lock(ctx))
			tc.f.mr.Set("fast:b", "00000000-0000-4000-8000-000000000000")
			err := m2.Unlock(ctx)
			assert.ErrorIs(t, err, ErrLockLost)
			v, _ := tc.f.mr.Get("fast:b")
			assert.Equal(t, "00000000-0000-4000-8000-000000000000", v)
		})
	}
}

// A native command the server refuses after the probe (an ACL changed, a
// failover to an older server) turns the fast paths off: that call and the
// later ones go by the scripts, and the lock works throughout.
func TestFastPathRefusedFallsBackToScripts(t *testing.T) {
	f := &flavor{setIfeq: true, delex: true}
	c, _ := newFlavored(t, f, WithWatchdogTimeout(300*time.Millisecond), WithRenewInterval(50*time.Millisecond))
	ctx := context.Background()
	m := c.NewMutex("fast:c")
	require.NoError(t, m.Lock(ctx))
	waitFor(t, "a native renewal", func() bool { return f.count("set") >= 2 })
	f.mu.Lock()
	f.refuse = true
	f.mu.Unlock()
	s0 := c.Stats()
	waitFor(t, "renewals by script after the refusal", func() bool { return c.Stats().Renewals >= s0.Renewals+3 })
	assert.True(t, m.IsHeld())
	assert.Equal(t, &caps{}, c.st.(*node).caps.Load())
	require.NoError(t, m.Unlock(ctx))
	assert.False(t, f.mr.Exists("fast:c"))
}

// A call that cannot reach the server forgets the probe's answer: the next
// connection may reach another server, which is probed again.
func TestUnreachableServerIsProbedAgain(t *testing.T) {
	f := &flavor{setIfeq: true, delex: true}
	c, _ := newFlavored(t, f)
	n := c.st.(*node)
	require.NotNil(t, n.fastPaths(context.Background()))
	require.NotNil(t, n.caps.Load())
	n.reroute(redisError("WRONGTYPE"))
	require.NotNil(t, n.caps.Load(), "a reply is no reason to probe again")
	n.reroute(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	assert.Nil(t, n.caps.Load())
	before := f.count("set")
	assert.Equal(t, &caps{setIfeq: true, delex: true}, n.fastPaths(context.Background()))
	assert.Equal(t, before+1, f.count("set"))
}

// Fast paths are for one server without replica acknowledgement: a Client
// with WithReplicaAck keeps the scripts (WAIT follows them in one pipeline).
func TestFastPathsOffWithReplicaAck(t *testing.T) {
	f := &flavor{setIfeq: true, delex: true}
	c, _ := newFlavored(t, f, WithReplicaAck(1, 10*time.Millisecond))
	assert.Nil(t, c.st.(*node).fastPaths(context.Background()))
	assert.Zero(t, f.count("set"))
}
