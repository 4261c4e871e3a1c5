package dlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of Semaphore (sem_*.lua); ExpirableSemaphore shares sem_set
// and sem_add for its total of permits.
var (
	semAcquireScript = loadScript("sem_acquire")
	semAcquireSource = scriptSource("sem_acquire")
	semAddScript     = loadScript("sem_add")
	semAddSource     = scriptSource("sem_add")
	semSetScript     = loadScript("sem_set")
	semSetSource     = scriptSource("sem_set")

	// WithRedissonCompat: Redisson's channel and messages (redisson_sem_*.lua).
	redissonSemAddScript = loadScript("redisson_sem_add")
	redissonSemAddSource = scriptSource("redisson_sem_add")
	redissonSemSetScript = loadScript("redisson_sem_set")
	redissonSemSetSource = scriptSource("redisson_sem_set")
)

// A Semaphore is a counting semaphore shared by every process that uses its
// name on the same Redis: Redisson's RSemaphore. Its Redis key is the name
// itself, a string holding the number of available permits (Redisson's
// layout), with no expiry. Get one from Client.NewSemaphore.
//
// Permits have no owner, as in Redisson: any caller may Release permits,
// also ones it never acquired, and Release may raise the count above what
// TrySetPermits set. Permits taken by a process that crashes (or whose reply
// was lost in the network) are never given back: use ExpirableSemaphore when
// that matters, whose permits have ids and leases.
//
// A semaphore whose permits were never set has none: Acquire waits until
// TrySetPermits, AddPermits or Release adds some.
//
// A Release wakes waiters at once by a notice on the Client's notifier (as
// Redisson's pub/sub): one waiter per Client, and a waiter that got its
// permits and sees permits left wakes the next local waiter, so a release of
// several permits lets several waiters through. A waiter for several permits
// that is woken while too few are free waits again, and the notice is not
// passed on: waiters for fewer permits behind it then look again after their
// backoff step.
//
// On a Client WithRedissonCompat the key is the same (Redisson's RSemaphore
// keeps the same string at the name), but the wake-ups are Redisson's: Release
// and AddPermits publish the permits now available, and TrySetPermits the
// permits set, on "redisson_sc:{<name>}" (RedissonSemaphore.getChannelName),
// and waiters wait on that channel, so that Java and Go services share one
// semaphore and wake each other. AddPermits then publishes whatever the sign
// (as Redisson does); every message wakes one waiter per Client, however many
// permits it announces (Redisson wakes as many as the count, at most).
//
// A Semaphore is not supported on a Redlock Client (every call returns an
// error matching ErrInvalidArgument). All methods are safe for concurrent use.
type Semaphore struct {
	c       *Client
	n       *node
	name    string
	keys    []string // {name}
	channel string   // the notice channel of the name's hash slot, or Redisson's
	err     error    // set when the handle is invalid; returned by every call

	// The scripts that add and set permits: sem_add and sem_set, or
	// Redisson's (redisson_sem_*) on a Client WithRedissonCompat.
	addScript, setScript *redis.Script
	addSource, setSource string
}

// NewSemaphore returns a handle on the semaphore called name. It does not
// talk to Redis. An empty name, a name in dlock's reserved "dlock:fence:"
// prefix, a nil Client or a Redlock Client does not panic: every call on the
// handle then returns an error matching ErrInvalidArgument.
func (c *Client) NewSemaphore(name string) *Semaphore {
	s := &Semaphore{c: c, name: name}
	s.n, s.err = c.familyStore("NewSemaphore", "semaphore", name)
	if s.err == nil {
		s.keys = []string{name}
		s.channel = noticeChannel(name)
		s.addScript, s.addSource = semAddScript, semAddSource
		s.setScript, s.setSource = semSetScript, semSetSource
		if c.redisson() {
			s.channel = redissonSemChannel(name)
			s.addScript, s.addSource = redissonSemAddScript, redissonSemAddSource
			s.setScript, s.setSource = redissonSemSetScript, redissonSemSetSource
		}
	}
	return s
}

// redissonSemChannel is RedissonSemaphore.getChannelName(name):
// "redisson_sc:{<name>}", or "redisson_sc:<name>" when the name has a brace.
func redissonSemChannel(name string) string { return redissonName("redisson_sc", name) }

// familyStore checks the Client and the name of a new semaphore or latch
// handle and returns the Client's store.
func (c *Client) familyStore(ctor, kind, name string) (*node, error) {
	switch {
	case c == nil:
		return nil, invalid("%s called on a nil *Client", ctor)
	case name == "":
		return nil, invalid("%s name is empty", kind)
	case strings.HasPrefix(name, fencePrefix):
		return nil, invalid("%s name %s is in the prefix %q that dlock reserves for its fencing counters", kind, quote(name), fencePrefix)
	}
	return c.single(kind, name)
}

// familyCheck returns why a call named op on a handle cannot proceed.
func familyCheck(ctx context.Context, c *Client, herr error, op, name string) error {
	if herr != nil {
		return herr
	}
	if ctx == nil {
		return invalid("nil context for %s %s", op, quote(name))
	}
	if c.closed() {
		return fmt.Errorf("dlock: %s %s: %w", op, quote(name), ErrClosed)
	}
	return nil
}

// Name returns the semaphore's name, which is also its Redis key.
func (s *Semaphore) Name() string { return s.name }

// TrySetPermits sets the number of available permits to n, only if the
// semaphore was never set (its key is absent), and reports whether it did:
// Redisson's trySetPermits. Waiters are woken. n may be 0 (the semaphore is
// then set, with no permits); a negative n returns an error matching
// ErrInvalidArgument.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	return semSetWith(ctx, s.c, s.n, s.err, s.setScript, s.setSource, s.name, s.keys, s.channel, n)
}

// semSet is TrySetPermits of ExpirableSemaphore.
func semSet(ctx context.Context, c *Client, nd *node, herr error, name string, keys []string, channel string, n int) (bool, error) {
	return semSetWith(ctx, c, nd, herr, semSetScript, semSetSource, name, keys, channel, n)
}

// semSetWith is semSet with the script of the caller's choosing (sem_set or
// redisson_sem_set, which take the same KEYS and ARGV).
func semSetWith(ctx context.Context, c *Client, nd *node, herr error, script *redis.Script, src, name string, keys []string, channel string, n int) (bool, error) {
	if err := familyCheck(ctx, c, herr, "set permits of", name); err != nil {
		return false, err
	}
	if n < 0 {
		return false, invalid("permits of semaphore %s must not be negative, got %d", quote(name), n)
	}
	v, err := nd.run(ctx, script, src, keys, n, c.pubArg, channel)
	if err != nil {
		return false, countErr("set permits of", name, "permit count", err)
	}
	st, ok := v.(int64)
	if !ok {
		return false, unexpected("sem_set", v)
	}
	return st == 1, nil
}

// AddPermits adds n permits to the semaphore, or removes -n when n is
// negative, whatever the permits set before: Redisson's addPermits. The count
// may go below zero; acquirers then wait until it is back above what they
// ask. Adding permits wakes waiters (on a Client WithRedissonCompat, any
// change is published, as Redisson does).
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	if err := familyCheck(ctx, s.c, s.err, "add permits to", s.name); err != nil {
		return err
	}
	_, err := semAddWith(ctx, s.c, s.n, s.addScript, s.addSource, "add permits to", s.name, s.keys, s.channel, n)
	return err
}

// semAdd runs sem_add and returns the new count.
func semAdd(ctx context.Context, c *Client, nd *node, op, name string, keys []string, channel string, n int) (int64, error) {
	return semAddWith(ctx, c, nd, semAddScript, semAddSource, op, name, keys, channel, n)
}

// semAddWith is semAdd with the script of the caller's choosing (sem_add or
// redisson_sem_add, which take the same KEYS and ARGV).
func semAddWith(ctx context.Context, c *Client, nd *node, script *redis.Script, src, op, name string, keys []string, channel string, n int) (int64, error) {
	v, err := nd.run(ctx, script, src, keys, n, c.pubArg, channel)
	if err != nil {
		return 0, countErr(op, name, "permit count", err)
	}
	count, ok := v.(int64)
	if !ok {
		return 0, unexpected("sem_add", v)
	}
	return count, nil
}

// Acquire takes n permits, waiting as long as it takes, until ctx ends (the
// error then matches ctx.Err()) or the Client closes (ErrClosed). Transient
// Redis errors are retried while it waits. n must be positive (else
// ErrInvalidArgument). The permits are not bound to ctx: they stay taken
// until someone releases them.
//
// Since permits have no owner, an attempt already sent is not cut short by
// ctx (it would leave unknown whether permits were taken): it completes
// within the go-redis client's read timeout, and a wait may overrun by that
// much; if that attempt took the permits, Acquire returns nil although ctx
// has ended, and the caller holds them. On a Client WithReplicaAck, permits taken without enough
// acknowledgements are given back and the error matches ErrNotReplicated.
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	_, err := s.acquire(ctx, n, 0, false)
	return err
}

// TryAcquire tries to take n permits for up to wait: TryAcquire(ctx, n, 0)
// makes one attempt. It returns (true, nil) when taken and (false, nil) when
// wait ran out with too few permits available. A negative wait or n not
// positive returns an error matching ErrInvalidArgument.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryAcquire wait must not be negative, got %v", wait)
	}
	return s.acquire(ctx, n, wait, true)
}

func (s *Semaphore) acquire(ctx context.Context, n int, d time.Duration, bounded bool) (bool, error) {
	if err := familyCheck(ctx, s.c, s.err, "acquire", s.name); err != nil {
		return false, err
	}
	if n <= 0 {
		return false, invalid("permits to acquire from semaphore %s must be positive, got %d", quote(s.name), n)
	}
	if ctx.Err() != nil {
		return false, ctxErr(ctx, "acquire", s.name, nil)
	}
	w := wait{op: "acquire", name: s.name, channel: s.channel, bounded: bounded}
	if bounded {
		w.until = time.Now().Add(d)
	}
	var left int64
	ok, err := s.c.waitFor(ctx, w, func(actx context.Context) (bool, time.Duration, error) {
		// sem_acquire serves both modes: it does what Redisson's script in
		// RedissonSemaphore.tryAcquireAsync does (GET, compare, DECRBY,
		// publish nothing), with dlock's checks for foreign data.
		// The permits have no owner: an attempt whose outcome stayed unknown
		// could take permits that nobody gives back. So an attempt is not cut
		// by the context; it runs until Redis answers or the connection fails.
		v, err := s.n.run(context.WithoutCancel(actx), semAcquireScript, semAcquireSource, s.keys, n)
		if err != nil && !errors.Is(err, ErrNotReplicated) {
			return false, -1, foreignCount(err, s.name, "permit count")
		}
		r, perr := parseStatus("sem_acquire", v)
		if perr != nil {
			return false, -1, permanent(perr)
		}
		if err != nil { // taken, but not acknowledged by enough replicas: give them back
			if r.status == 1 {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.cfg.closeTimeout)
				defer cancel()
				_, _ = s.addScript.Run(rctx, s.n.rdb, s.keys, n, s.c.pubArg, s.channel).Result()
			}
			return false, -1, err
		}
		if r.status != 1 {
			return false, -1, nil
		}
		left = r.value
		return true, 0, nil
	})
	if ok && left > 0 {
		s.c.n.pokeOn(s.channel, s.name) // permits left: the next local waiter may take some
	}
	return ok, err
}

// Release gives n permits back to the semaphore (n must be positive, else
// ErrInvalidArgument) and wakes waiters. As in Redisson, the permits need not
// have been acquired by the caller: the semaphore has no owners.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if err := familyCheck(ctx, s.c, s.err, "release", s.name); err != nil {
		return err
	}
	if n <= 0 {
		return invalid("permits to release to semaphore %s must be positive, got %d", quote(s.name), n)
	}
	_, err := semAddWith(ctx, s.c, s.n, s.addScript, s.addSource, "release", s.name, s.keys, s.channel, n)
	return err
}

// Available returns the number of permits available now: 0 when the
// semaphore was never set; negative after AddPermits took more than there
// were.
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	if err := familyCheck(ctx, s.c, s.err, "read permits of", s.name); err != nil {
		return 0, err
	}
	v, err := readCount(ctx, s.n, s.name, "permit count")
	if err != nil {
		return 0, countErr("read permits of", s.name, "permit count", err)
	}
	return int(v), nil
}

// readCount reads the integer held by the string key name (a semaphore's
// permits, a latch's count): 0 when the key is absent. A key holding other
// data (what) gives an error matching ErrWrongType.
func readCount(ctx context.Context, n *node, name, what string) (int64, error) {
	v, err := n.rdb.Get(ctx, name).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		kind, terr := n.rdb.Type(ctx, name).Result()
		if terr != nil {
			kind = "another Redis type"
		}
		return 0, countWrongType(name, kind, what)
	case err != nil:
		n.reroute(err)
		return 0, err
	}
	count, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil {
		return 0, countWrongType(name, "string", what)
	}
	return count, nil
}

// countErr wraps an error of op on the counter key name (what it should hold,
// for messages): data dlock did not write gives an error matching
// ErrWrongType.
func countErr(op, name, what string, err error) error {
	if kind, ok := foreignKind(err); ok {
		return countWrongType(name, kind, what)
	}
	if errors.Is(err, ErrWrongType) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrClosed) {
		return err
	}
	return redisErr(op, name, err)
}

// foreignCount turns a script's error for foreign data in the counter key
// name into an error matching ErrWrongType, and returns any other as it is
// (for waitFor, which classifies and wraps it).
func foreignCount(err error, name, what string) error {
	if kind, ok := foreignKind(err); ok {
		return countWrongType(name, kind, what)
	}
	return err
}

// countWrongType reports that the key name holds data that is not what
// (a "permit count", a "latch count").
func countWrongType(name, kind, what string) error {
	if kind == "string" {
		return fmt.Errorf("%w: key %s holds a string that is not a dlock %s (an integer)", ErrWrongType, quote(name), what)
	}
	return fmt.Errorf("%w: key %s holds a %s, not a dlock %s (WRONGTYPE)", ErrWrongType, quote(name), kind, what)
}

// unexpected reports a script reply of the wrong shape.
func unexpected(script string, v any) error {
	return permanent(fmt.Errorf("dlock: unexpected reply from %s script: %v", script, v))
}

// permanent marks err as a reply of Redis, which waiting calls do not retry
// (isTransient retries every error that is not one).
func permanent(err error) error { return permanentErr{err} }

type permanentErr struct{ error }

func (permanentErr) RedisError() {}

func (e permanentErr) Unwrap() error { return e.error }
