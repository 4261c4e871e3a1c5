package testserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// LockUser is the ACL user the harness creates on every server it starts,
// with the least-privilege rule of README.md ("Least privilege (ACL)"):
// (*Redis).Client connects as this user, so every test runs dlock with only
// the rights the README asks for.
const LockUser = "locker"

// LockCommands are the commands dlock needs on a single server (or the
// primary behind Sentinel), named one by one: the scripts run by EVALSHA with
// an EVAL fallback, the commands the scripts call (they are checked against
// the same user), PING and the pub/sub commands of the notifier. README.md
// says why each one is there; integration/acl_test.go checks that the list
// is enough and that each entry is needed.
var LockCommands = []string{
	"evalsha", "eval",
	"set", "get", "del", "pexpire", "pttl", "type", "strlen", "incr", "time", "publish",
	"subscribe", "unsubscribe", "ping",
}

// FamilyCommands are what the synchronizers beyond Mutex (RWMutex,
// FairMutex, Semaphore, ExpirableSemaphore, CountDownLatch) run inside their
// scripts, on top of LockCommands (ClusterLockCommands on a cluster). The
// harness's user has them too; README.md lists them for users of those types.
var FamilyCommands = []string{
	"exists", "incrby", "decrby",
	"zadd", "zrem", "zscore", "zcard", "zrange", "zrangebyscore", "zremrangebyscore",
	"rpush", "lpop", "lrem", "lindex", "lrange", "llen",
	// WithRedissonCompat: Redisson's hashes.
	"hset", "hget", "hdel", "hexists", "hincrby", "hlen", "hkeys", "hgetall", "decr",
	// WithRedissonCompat: FairMutex (Redisson's timeouts chained by ZINCRBY).
	"zincrby",
}

// FamilyChannels are the channels of a Client WithRedissonCompat, Redisson's
// (redisson_lock__channel:{name}, redisson_sc:{name}, ...), on top of
// dlock's own; the harness's user has them.
var FamilyChannels = []string{"&redisson_*"}

// LockRule returns the ACL SETUSER rule, after the user name, that gives a
// user with password the rights dlock needs on locks whose names match
// keyPatterns (glob patterns such as "lock:*"): dlock's own fencing counters
// and notice channels are added (unless a pattern is "*", which covers them:
// Redis refuses patterns after it). Pass commands to use another list than
// LockCommands.
func LockRule(password string, keyPatterns []string, commands ...string) []string {
	if commands == nil {
		commands = LockCommands
	}
	r := []string{"reset", "on", ">" + password, "resetkeys"}
	all := false
	for _, k := range keyPatterns {
		r = append(r, "~"+k)
		all = all || k == "*"
	}
	if !all {
		r = append(r, "~dlock:fence:*")
	}
	r = append(r, "resetchannels", "&dlock:notice:*", "-@all")
	for _, c := range commands {
		r = append(r, "+"+c)
	}
	return r
}

// LockUser returns the name and password of the user Client connects as.
func (r *Redis) LockUser() (name, password string) { return LockUser, r.password }

// lockPassword is LockUser's password on every server of the test process,
// random, and the same on all of them, so that a client keeps authenticating
// when it moves between servers (a failover to a replica, a cluster).
var lockPassword = newPassword()

// newPassword returns a fresh random password.
func newPassword() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createLockUser creates (or resets) LockUser on the server through a
// full-rights connection, with the key pattern "*" standing for the lock
// names (the tests use many). Commands the server does not know (renamed
// away with --rename-command, say) are left out of the rule, so such a
// server still answers "unknown command" rather than ACL SETUSER failing.
func (r *Redis) createLockUser() error {
	if r.password == "" {
		r.password = lockPassword
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := r.adminOptions()
	o.MaxRetries = -1
	admin := redis.NewClient(o)
	defer admin.Close()
	args := []any{"COMMAND", "INFO"}
	all := append(append([]string{}, LockCommands...), FamilyCommands...)
	for _, c := range all {
		args = append(args, c)
	}
	infos, err := admin.Do(ctx, args...).Slice()
	if err != nil {
		return fmt.Errorf("COMMAND INFO: %w", err)
	}
	known := make([]string, 0, len(all))
	for i, c := range all {
		if i < len(infos) && infos[i] != nil {
			known = append(known, c)
		}
	}
	args = []any{"ACL", "SETUSER", LockUser}
	for _, t := range append(LockRule(r.password, []string{"*"}, known...), FamilyChannels...) {
		args = append(args, t)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("ACL SETUSER %s: %w", LockUser, err)
	}
	return nil
}

// ExpectDenials tells the harness that the test makes Redis refuse LockUser
// on purpose (sends FLUSHALL through Client, say). Without it, a test fails
// when the server it started refused LockUser anything: the server's ACL log
// is read when the server stops (Kill, Restart, the end of the test). That
// catches a dlock that needs a right the README's rule lacks even where the
// refusal never reaches the caller (the notifier's PING and UNSUBSCRIBE), and
// a test that sends its own commands through Client instead of Admin.
func (r *Redis) ExpectDenials() {
	r.mu.Lock()
	r.denialsOK = true
	r.mu.Unlock()
}

// lockUserRefusals reads the ACL LOG of the server that o reaches as an
// admin and returns what it refused LockUser, sorted; nothing when the
// server does not answer within a second (paused, gone). A wrong password is
// no missing right and is left out.
func lockUserRefusals(o *redis.Options) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	admin := redis.NewClient(o)
	defer admin.Close()
	entries, err := admin.Do(ctx, "ACL", "LOG").Slice()
	if err != nil {
		return nil
	}
	var refused []string
	for _, e := range entries {
		f := aclLogEntry(e)
		if f["username"] == LockUser && f["reason"] != "auth" {
			refused = append(refused, fmt.Sprintf("%s %s (%s, %s times)", f["reason"], f["object"], f["context"], f["count"]))
		}
	}
	sort.Strings(refused)
	return refused
}

// checkDenials fails the test if the server's ACL log holds refusals of
// LockUser, unless the test expects them. A server that does not answer
// within a second (paused, gone) is not checked.
func (r *Redis) checkDenials() {
	r.mu.Lock()
	ok := r.denialsOK
	r.mu.Unlock()
	if ok {
		return
	}
	o := r.adminOptions()
	o.MaxRetries = -1
	if refused := lockUserRefusals(o); len(refused) > 0 {
		r.tb.Errorf("testserver: Redis refused %s (ACL LOG): %s. Either dlock needs a right that README's rule "+
			"(LockCommands) lacks, or the test sent its own commands through Client: use Admin for those, "+
			"or call ExpectDenials if the refusal is the point of the test", LockUser, strings.Join(refused, "; "))
	}
}

// aclLogEntry reads one ACL LOG entry (a RESP3 map or a RESP2 list of
// field, value pairs) into strings.
func aclLogEntry(e any) map[string]string {
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
	return f
}
