package dlock

import (
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua scripts/lib/*.lua
var scriptFiles embed.FS

func loadScript(name string) *redis.Script {
	return redis.NewScript(scriptSource(name))
}

// includePrefix starts a script line that stands for a shared piece of Lua:
// "--#include fence" is replaced by scripts/lib/fence.lua, so that every
// script that grants hands out fencing tokens by the same code.
const includePrefix = "--#include "

// scriptSource returns the Lua of scripts/<name>.lua with its includes in
// place.
func scriptSource(name string) string {
	src := mustRead("scripts/" + name + ".lua")
	if !strings.Contains(src, includePrefix) {
		return src
	}
	lines := strings.SplitAfter(src, "\n")
	for i, l := range lines {
		if lib, ok := strings.CutPrefix(strings.TrimSpace(l), includePrefix); ok {
			lines[i] = mustRead("scripts/lib/" + lib + ".lua")
		}
	}
	return strings.Join(lines, "")
}

func mustRead(path string) string {
	src, err := scriptFiles.ReadFile(path)
	if err != nil {
		panic("dlock: embedded script missing: " + path) // a build defect, caught by every test
	}
	return string(src)
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
	raiseScript       = loadScript("raise")

	// The sources a pipeline sends with EVAL when the server answers
	// NOSCRIPT (a pipelined EVALSHA cannot fall back by itself).
	acquireSource = scriptSource("acquire")
	releaseSource = scriptSource("release")
	renewSource   = scriptSource("renew")
)

func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }

// foreignPrefix starts the error a script returns for a key that holds data
// dlock did not write; the key's type follows.
const foreignPrefix = "WRONGTYPE dlock: "

// foreignKind reports whether err is that error, and the type it names.
func foreignKind(err error) (string, bool) {
	var rerr redis.Error
	if !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), foreignPrefix) {
		return "", false
	}
	return strings.TrimPrefix(rerr.Error(), foreignPrefix), true
}

// statusReply is a script's {status, integer or type} answer.
type statusReply struct {
	status int64  // the script's status
	value  int64  // an integer that goes with it
	kind   string // or a key's type
}

// parseStatus reads a {status, integer or type} reply of script.
func parseStatus(script string, v any) (statusReply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return statusReply{}, fmt.Errorf("dlock: unexpected reply from %s script: %v", script, v)
	}
	st, ok := arr[0].(int64)
	if !ok {
		return statusReply{}, fmt.Errorf("dlock: unexpected reply from %s script: %v", script, v)
	}
	r := statusReply{status: st}
	switch x := arr[1].(type) {
	case int64:
		r.value = x
	case string:
		r.kind = x
	default:
		return statusReply{}, fmt.Errorf("dlock: unexpected reply from %s script: %v", script, v)
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
