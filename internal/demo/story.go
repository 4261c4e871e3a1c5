package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
)

// LockName is the lock the workers race for.
const LockName = "lock:order:1001"

// Options shape a run of the story.
type Options struct {
	// Lease is each worker's fixed lease; the first worker to get the lock
	// stalls for 1.5 leases. Default 1s.
	Lease time.Duration
	// Out receives the timeline.
	Out io.Writer
	// Color adds ANSI colours (for a terminal).
	Color bool
}

// Result is what happened to the order.
type Result struct {
	Shipped, Skipped, Rejected int
	ShippedBy, Stalled         string
}

// shipments is the storage the workers write to, with the fencing check
// that a SQL table would do as
//
//	UPDATE shipment SET status = $1, lock_token = $2
//	WHERE order_id = $3 AND lock_token < $2
type shipments struct {
	mu     sync.Mutex
	status string
	token  int64 // the largest token accepted so far
}

func (s *shipments) shipped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status == "shipped"
}

// ship records the shipment if token is above every token accepted before.
func (s *shipments) ship(token int64) (accepted bool, stored int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token <= s.token {
		return false, s.token
	}
	s.status, s.token = "shipped", token
	return true, token
}

// Run plays the story on rdb: three workers, each with its own Client (as if
// in its own process), lock the order with a fixed lease. The first to get
// the lock stalls for 1.5 leases (a long GC pause, a slow label printer) after
// checking the order, so its lease runs out while it is frozen.
func Run(ctx context.Context, rdb redis.UniversalClient, opts Options) (Result, error) {
	lease := opts.Lease
	if lease <= 0 {
		lease = time.Second
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	tl := &timeline{out: out, color: opts.Color, start: time.Now()}
	store := &shipments{}
	var (
		res     Result
		resMu   sync.Mutex
		stalled atomic.Bool
		wg      sync.WaitGroup
		errs    = make(chan error, 3)
	)
	for i := 1; i <= 3; i++ {
		client, err := dlock.New(rdb)
		if err != nil {
			return res, err
		}
		defer client.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := worker(ctx, i, client, lease, tl, store, &stalled, &res, &resMu); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return res, errors.Join(all...)
}

// worker is one delivery of the order: lock, check, ship, unlock.
func worker(ctx context.Context, i int, client *dlock.Client, lease time.Duration, tl *timeline,
	store *shipments, stalled *atomic.Bool, res *Result, resMu *sync.Mutex) error {
	name := fmt.Sprintf("worker-%d", i)
	m := client.NewMutex(LockName, dlock.WithLeaseTime(lease))
	tl.say(i, warn, "got order 1001, asks for %s", LockName)
	ok, err := m.TryLock(ctx, 10*lease)
	if err != nil || !ok {
		return fmt.Errorf("%s: lock not acquired: %v", name, err)
	}
	token := m.FencingToken()
	tl.say(i, good, "acquired the lock, fencing token %d", token)
	if store.shipped() {
		tl.say(i, warn, "order 1001 is already shipped: skips the duplicate delivery")
		resMu.Lock()
		res.Skipped++
		resMu.Unlock()
		return m.Unlock(ctx)
	}
	tl.say(i, plain, "order 1001 is not shipped yet: prints the label")
	if stalled.CompareAndSwap(false, true) {
		resMu.Lock()
		res.Stalled = name
		resMu.Unlock()
		tl.say(i, warn, "stalls (a long GC pause) for %v, past its %v lease", lease*3/2, lease)
		lostSeen := make(chan struct{})
		go func() {
			defer close(lostSeen)
			<-m.Done()
			tl.say(i, bad, "(while frozen) lock lost: %v", m.Err())
		}()
		time.Sleep(lease * 3 / 2) // the stall the story is about
		<-lostSeen
		tl.say(i, plain, "wakes up, still believes it holds the lock, writes \"shipped\"")
	} else {
		time.Sleep(lease / 10) // printing the label
	}
	accepted, stored := store.ship(token)
	resMu.Lock()
	if accepted {
		res.Shipped++
		res.ShippedBy = name
		tl.say(i, good, "shipped order 1001 (write accepted with token %d)", token)
	} else {
		res.Rejected++
		tl.say(i, bad, "write REJECTED by the fencing check: token %d < stored %d", token, stored)
	}
	resMu.Unlock()
	if err := m.Unlock(ctx); errors.Is(err, dlock.ErrLockLost) {
		tl.say(i, bad, "Unlock reports the loss: %v", err)
	} else if err != nil {
		return fmt.Errorf("%s: unlock: %w", name, err)
	}
	return nil
}
