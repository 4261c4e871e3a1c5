package dlock

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors. Every error dlock returns wraps one of these (or a context
// or Redis error), so callers test them with [errors.Is].
var (
	// ErrNotHeld is returned by Unlock when the handle holds nothing.
	ErrNotHeld = errors.New("dlock: lock not held")

	// ErrLockLost is returned when a hold ended without Unlock: its key was
	// deleted or taken by another token, its lease ran out, or renewal could
	// not be confirmed before the lease's deadline. It is the cause of the
	// context that WithLock hands to its function, and what Err reports.
	ErrLockLost = errors.New("dlock: lock lost")

	// ErrClosed is returned by every call on a Client, or a Mutex of it, after
	// Client.Close, and is what Err reports for a hold that Close ended.
	ErrClosed = errors.New("dlock: client closed")

	// ErrWrongType is returned when a lock's key holds data dlock did not
	// write: another Redis type, or a string that is not a dlock token. dlock
	// never modifies or deletes such a key.
	ErrWrongType = errors.New("dlock: key holds data that is not a dlock lock")

	// ErrInvalidArgument is returned for a bad argument or option: a nil
	// client, an empty name, a duration that is zero or negative where it must
	// be positive, a renew interval not below the watchdog timeout.
	ErrInvalidArgument = errors.New("dlock: invalid argument")

	// ErrNoScripting is returned when the server refuses Lua scripts (EVAL
	// and EVALSHA unknown, or renamed away), which every dlock call needs.
	ErrNoScripting = errors.New("dlock: server does not run Lua scripts")

	// ErrNoQuorum is returned by a Redlock Client (NewRedlock) when too few
	// of its servers answered to confirm an operation by a majority. It is
	// transient: waiting calls retry it until their time runs out.
	ErrNoQuorum = errors.New("dlock: no quorum")
)

// errUnlocked is the cause given to a hold's context by a plain Unlock.
var errUnlocked = errors.New("dlock: unlocked")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// isTransient reports whether err may go away by itself (a network failure, a
// server loading or failing over), so that waiting callers retry it.
func isTransient(err error) bool {
	if err == nil || errors.Is(err, redis.ErrClosed) || errors.Is(err, ErrNoScripting) ||
		errors.Is(err, ErrWrongType) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrNotReplicated) {
		return false
	}
	if isTLSConfigError(err) {
		return false // a certificate the client does not trust will not change by itself
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true // network errors, timeouts, pool exhaustion
	}
	msg := strings.TrimPrefix(rerr.Error(), "ERR ")
	for _, p := range []string{"LOADING", "BUSY ", "TRYAGAIN", "CLUSTERDOWN", "READONLY",
		"MASTERDOWN", "NOREPLICAS", "OOM", "MOVED", "ASK", "max number of clients"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// isTLSConfigError reports a TLS failure that retrying cannot fix: an
// untrusted or invalid certificate, or a server that does not speak TLS.
func isTLSConfigError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		header   tls.RecordHeaderError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &invalid) ||
		errors.As(err, &hostname) || errors.As(err, &header)
}

// redisErr wraps an error from Redis for the lock called name, naming what
// was being done and translating a server without scripting.
func redisErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := strings.ToLower(rerr.Error())
		if strings.Contains(msg, "unknown command") && strings.Contains(msg, "eval") {
			return fmt.Errorf("dlock: %s %s: %w: %w", op, quote(name), ErrNoScripting, err)
		}
	}
	return fmt.Errorf("dlock: %s %s: %w", op, quote(name), err)
}

// quote returns name quoted for messages, shortened when it is very long so a
// huge name cannot flood a log.
func quote(name string) string {
	const most = 200
	if len(name) > most {
		return fmt.Sprintf("%q… (%d bytes)", name[:most], len(name))
	}
	return fmt.Sprintf("%q", name)
}
