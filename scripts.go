package dlock

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

func loadScript(name string) *redis.Script {
	src, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic("dlock: embedded script missing: " + name) // a build defect, caught by every test
	}
	return redis.NewScript(string(src))
}

// The scripts, one per file under scripts/, each loaded into Redis once: the
// first call sends EVALSHA and falls back to EVAL (which caches it) only when
// the server does not know the script yet.
var (
	acquireScript     = loadScript("acquire")
	releaseScript     = loadScript("release")
	renewScript       = loadScript("renew")
	inspectScript     = loadScript("inspect")
	forceUnlockScript = loadScript("force_unlock")

	allScripts = []*redis.Script{acquireScript, releaseScript, renewScript, inspectScript, forceUnlockScript}
)

// loadScripts loads every script into the server's cache (on every shard of a
// cluster), which pipelined EVALSHA calls need because they cannot fall back.
func loadScripts(ctx context.Context, rdb redis.Scripter) error {
	for _, s := range allScripts {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}

func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }

// acquireReply is the outcome of one run of acquire.lua (or of another
// script answering {status, integer or type}).
type acquireReply struct {
	status int64  // 1 acquired, 0 busy, -1 foreign data
	value  int64  // the fencing token when acquired, else the key's PTTL in ms
	kind   string // the key's type when status is -1
}

// parseAcquire reads a {status, integer or type} reply of script.
func parseAcquire(v any) (acquireReply, error) { return parseStatus("acquire", v) }

func parseStatus(script string, v any) (acquireReply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return acquireReply{}, fmt.Errorf("dlock: unexpected reply from %s script: %v", script, v)
	}
	st, ok := arr[0].(int64)
	if !ok {
		return acquireReply{}, fmt.Errorf("dlock: unexpected reply from %s script: %v", script, v)
	}
	r := acquireReply{status: st}
	switch x := arr[1].(type) {
	case int64:
		r.value = x
	case string:
		r.kind = x
	default:
		return acquireReply{}, fmt.Errorf("dlock: unexpected reply from %s script: %v", script, v)
	}
	return r, nil
}

// wrongType reports that the key called name holds data dlock did not write.
func wrongType(name, kind string) error {
	if kind == "string" || kind == "foreign" {
		return fmt.Errorf("%w: key %s holds a string that is not a dlock token", ErrWrongType, quote(name))
	}
	return fmt.Errorf("%w: key %s holds a %s (WRONGTYPE)", ErrWrongType, quote(name), kind)
}

// leaseArg formats a lease for a script, in whole milliseconds (at least 1).
func leaseArg(d time.Duration) string {
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return strconv.FormatInt(ms, 10)
}

// int64s reads a script's array of integers.
func int64s(v any, n int) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != n {
		return nil, errors.New("dlock: unexpected reply from renew script")
	}
	out := make([]int64, n)
	for i, x := range arr {
		if out[i], ok = x.(int64); !ok {
			return nil, errors.New("dlock: unexpected reply from renew script")
		}
	}
	return out, nil
}
