package main

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

// shipments is the storage the workers write to, with the fencing check that
// a SQL table would do as
//
//	UPDATE shipment SET status = $1, lock_token = $2
//	WHERE order_id = $3 AND lock_token < $2
type shipments struct {
	mu        sync.Mutex
	status    string
	shippedBy string
	token     int64 // the largest token accepted so far
}

func (s *shipments) shipped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status == "shipped"
}

// ship records the shipment if token is above every token accepted before.
func (s *shipments) ship(worker string, token int64) (accepted bool, stored int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token <= s.token {
		return false, s.token
	}
	s.status, s.shippedBy, s.token = "shipped", worker, token
	return true, token
}

type result struct {
	shipped, skipped, rejected int
	shippedBy, stalled         string
}

// run plays the story: three workers, each with its own Client (as if in its
// own process), lock the order with a fixed lease. The first to get the lock
// stalls for 1.5 leases (a long GC pause, a slow label printer) after checking
// the order, so its lease runs out while it is frozen.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer, lease time.Duration) (result, error) {
	tl := &timeline{out: out, start: time.Now()}
	store := &shipments{}
	var (
		res     result
		resMu   sync.Mutex
		stalled atomic.Bool
		wg      sync.WaitGroup
		errs    = make(chan error, 3)
	)
	for i := 1; i <= 3; i++ {
		worker := fmt.Sprintf("worker-%d", i)
		client, err := dlock.New(rdb)
		if err != nil {
			return res, err
		}
		defer client.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := client.NewMutex("lock:order:1001", dlock.WithLeaseTime(lease))
			tl.say(worker, "got order 1001, asks for lock:order:1001")
			ok, err := m.TryLock(ctx, 10*lease)
			if err != nil || !ok {
				errs <- fmt.Errorf("%s: lock not acquired: %v", worker, err)
				return
			}
			token := m.FencingToken()
			tl.say(worker, "acquired the lock, fencing token %d", token)
			if store.shipped() {
				tl.say(worker, "order 1001 is already shipped: skips the duplicate delivery")
				resMu.Lock()
				res.skipped++
				resMu.Unlock()
				_ = m.Unlock(ctx)
				return
			}
			tl.say(worker, "order 1001 is not shipped yet: prints the label")
			if stalled.CompareAndSwap(false, true) {
				resMu.Lock()
				res.stalled = worker
				resMu.Unlock()
				tl.say(worker, "stalls (a long GC pause) for %v, past its %v lease", lease*3/2, lease)
				go func() {
					<-m.Done()
					tl.say(worker, "(while frozen) lock lost: %v", m.Err())
				}()
				time.Sleep(lease * 3 / 2) // the stall being simulated
				tl.say(worker, "wakes up, still believes it holds the lock, writes \"shipped\"")
			} else {
				time.Sleep(lease / 10) // printing the label
			}
			accepted, stored := store.ship(worker, token)
			resMu.Lock()
			if accepted {
				res.shipped++
				res.shippedBy = worker
				tl.say(worker, "shipped order 1001 (write accepted with token %d)", token)
			} else {
				res.rejected++
				tl.say(worker, "write REJECTED by the fencing check: token %d < stored %d", token, stored)
			}
			resMu.Unlock()
			if err := m.Unlock(ctx); errors.Is(err, dlock.ErrLockLost) {
				tl.say(worker, "Unlock reports the loss: %v", err)
			} else if err != nil {
				errs <- fmt.Errorf("%s: unlock: %w", worker, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return res, errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}
