package dlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeExec stands in for Redis in the watchdog: each pass is handed to the
// test, which answers it.
type fakeExec struct {
	passes chan *fakePass
}

type fakePass struct {
	batch []*entry
	reply chan []result
}

func (f *fakeExec) exec(ctx context.Context, batch []*entry) []result {
	p := &fakePass{batch: batch, reply: make(chan []result, 1)}
	f.passes <- p
	select {
	case r := <-p.reply:
		return r
	case <-ctx.Done():
		res := make([]result, len(batch))
		for i := range res {
			res[i].err = ctx.Err()
		}
		return res
	}
}

func (p *fakePass) answer(status int64, err error) {
	res := make([]result, len(p.batch))
	for i := range res {
		res[i] = result{status: status, err: err}
	}
	p.reply <- res
}

// watchdogFixture is a Client on miniredis whose watchdog runs on a fake
// clock and a fake executor. Locks are acquired for real (on miniredis), then
// renewals are answered by the test.
type watchdogFixture struct {
	t   *testing.T
	c   *Client
	clk *fakeClock
	fx  *fakeExec
}

const (
	wdTimeout  = 3 * time.Second
	wdInterval = time.Second
)

func newWatchdogFixture(t *testing.T) *watchdogFixture {
	clk := newFakeClock()
	c, _, _ := newMini(t, WithWatchdogTimeout(wdTimeout), WithRenewInterval(wdInterval), withClock(clk))
	fx := &fakeExec{passes: make(chan *fakePass, 16)}
	c.w.mu.Lock()
	c.w.exec = fx.exec
	c.w.mu.Unlock()
	return &watchdogFixture{t: t, c: c, clk: clk, fx: fx}
}

func (f *watchdogFixture) lock(name string, opts ...MutexOption) *Mutex {
	f.t.Helper()
	m := f.c.NewMutex(name, opts...)
	if err := m.Lock(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	return m
}

// nextPass waits for the watchdog to send a pass.
func (f *watchdogFixture) nextPass() *fakePass {
	f.t.Helper()
	select {
	case p := <-f.fx.passes:
		return p
	case <-time.After(5 * time.Second):
		f.t.Fatal("no renewal pass within 5s")
		return nil
	}
}

func (f *watchdogFixture) noPass() {
	f.t.Helper()
	select {
	case p := <-f.fx.passes:
		f.t.Fatalf("unexpected pass of %d entries", len(p.batch))
	case <-time.After(20 * time.Millisecond):
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not closed within 5s", what)
	}
}

func TestWatchdogRenewsOnScheduleAndExtendsDeadline(t *testing.T) {
	f := newWatchdogFixture(t)
	m := f.lock("a")
	first := m.current().deadline.Load()
	f.noPass()
	f.clk.Advance(wdInterval)
	p := f.nextPass()
	if len(p.batch) != 1 || p.batch[0].key != "a" || p.batch[0].kind != kindRenew {
		t.Fatalf("pass = %+v", p.batch)
	}
	p.answer(1, nil)
	waitFor(t, "deadline extended", func() bool { return m.current().deadline.Load() > first })
	if got, want := m.current().deadline.Load(), int64(wdInterval)+leaseEnd(0, wdTimeout); got != want {
		t.Fatalf("deadline = %v, want renewal start + lease - margin = %v", time.Duration(got), time.Duration(want))
	}
	// Many renewals later the hold is still alive.
	for range 10 {
		f.clk.Advance(wdInterval)
		f.nextPass().answer(1, nil)
	}
	if !m.IsHeld() {
		t.Fatalf("hold ended: %v", m.Err())
	}
}

// The deadline is enforced by the watchdog's timer even while a renewal call
// never returns (a frozen server).
func TestWatchdogLosesAtDeadlineWhileRenewalHangs(t *testing.T) {
	f := newWatchdogFixture(t)
	m := f.lock("frozen")
	f.clk.Advance(wdInterval)
	p := f.nextPass() // never answered until the end
	defer p.answer(1, nil)
	f.clk.Advance(wdTimeout - wdInterval - leaseMargin(wdTimeout) - time.Millisecond)
	if !m.IsHeld() {
		t.Fatal("hold ended before its deadline")
	}
	f.clk.Advance(time.Millisecond)
	if m.IsHeld() {
		t.Fatal("IsHeld true at the deadline")
	}
	waitClosed(t, m.Done(), "Done at the deadline")
	if !errors.Is(m.Err(), ErrLockLost) {
		t.Fatalf("Err = %v", m.Err())
	}
}

// A renewal that cannot reach Redis is retried quickly until the deadline.
func TestWatchdogRetriesFailedRenewalUntilDeadline(t *testing.T) {
	f := newWatchdogFixture(t)
	m := f.lock("flaky")
	f.clk.Advance(wdInterval)
	f.nextPass().answer(0, errors.New("connection refused"))
	retry := f.c.w.retry
	if retry != wdInterval/10 {
		t.Fatalf("retry = %v, want interval/10", retry)
	}
	f.clk.Advance(retry)
	f.nextPass().answer(0, errors.New("connection refused"))
	f.clk.Advance(retry)
	f.nextPass().answer(1, nil) // recovered
	if !m.IsHeld() {
		t.Fatal("hold lost although a retry succeeded")
	}
	f.clk.Advance(wdInterval)
	f.nextPass().answer(0, errors.New("connection refused"))
	for m.IsHeld() {
		f.clk.Advance(retry)
		select {
		case p := <-f.fx.passes:
			p.answer(0, errors.New("connection refused"))
		case <-m.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	waitClosed(t, m.Done(), "Done after failed retries")
	if err := m.Err(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Err = %v", err)
	}
}

func TestWatchdogLosesWhenKeyIsNotOurs(t *testing.T) {
	for _, st := range []int64{0, -1, -2} {
		f := newWatchdogFixture(t)
		m := f.lock("gone")
		f.clk.Advance(wdInterval)
		f.nextPass().answer(st, nil)
		waitClosed(t, m.Done(), "Done")
		if !errors.Is(m.Err(), ErrLockLost) || m.IsHeld() {
			t.Fatalf("status %d: Err = %v", st, m.Err())
		}
	}
}

// A fixed lease is never renewed and ends at its deadline.
func TestWatchdogFixedLeaseNotRenewed(t *testing.T) {
	f := newWatchdogFixture(t)
	m := f.lock("fixed", WithLeaseTime(2*time.Second))
	f.clk.Advance(time.Second)
	f.noPass()
	f.clk.Advance(time.Second)
	waitClosed(t, m.Done(), "Done at the fixed lease's end")
	f.noPass()
	if !errors.Is(m.Err(), ErrLockLost) {
		t.Fatalf("Err = %v", m.Err())
	}
}

// When a renewal succeeds only after the hold was declared lost, the key it
// extended is deleted in the background.
func TestWatchdogReleasesKeyExtendedAfterLoss(t *testing.T) {
	f := newWatchdogFixture(t)
	m := f.lock("late")
	f.clk.Advance(wdInterval)
	p := f.nextPass()
	f.clk.Advance(wdTimeout)
	waitClosed(t, m.Done(), "Done")
	p.answer(1, nil)
	// The loss queued a release of the token, and so does the late success:
	// two releases, in one pass or two.
	for seen := 0; seen < 2; {
		f.clk.Advance(f.c.w.retry)
		q := f.nextPass()
		for _, e := range q.batch {
			if e.kind != kindOrphan || e.key != "late" {
				t.Fatalf("pass after the loss holds %+v, want orphan releases of the key", e)
			}
			seen++
		}
		q.answer(1, nil)
	}
}

// Renewals due close together go out in one pass.
func TestWatchdogBatchesDueRenewals(t *testing.T) {
	f := newWatchdogFixture(t)
	var ms []*Mutex
	for _, n := range []string{"b1", "b2", "b3"} {
		ms = append(ms, f.lock(n))
	}
	f.clk.Advance(wdInterval)
	p := f.nextPass()
	if len(p.batch) != 3 {
		t.Fatalf("pass of %d entries, want 3", len(p.batch))
	}
	p.answer(1, nil)
	for _, m := range ms {
		_ = m.Unlock(context.Background())
	}
}

func TestWatchdogPlanGroupsBatches(t *testing.T) {
	f := newWatchdogFixture(t)
	f.c.cfg.batchSize = 2
	batch := []*entry{
		{kind: kindRenew, key: "a"}, {kind: kindRenew, key: "b"}, {kind: kindOrphan, key: "o"},
		{kind: kindRenew, key: "c"},
	}
	calls := f.c.st.(*node).plan(batch)
	if len(calls) != 3 || len(calls[0].idx) != 2 || len(calls[1].idx) != 1 || len(calls[2].idx) != 1 {
		t.Fatalf("plan = %+v, want [a b] [o] [c]", calls)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A fixed lease whose deadline falls exactly on the renew interval must not
// make the scheduler spin (it is never renewed, whatever the numbers).
func TestWatchdogFixedLeaseOnIntervalBoundaryDoesNotSpin(t *testing.T) {
	f := newWatchdogFixture(t)
	lease := wdInterval + leaseMargin(wdInterval) // deadline - start == interval, near enough
	for leaseEnd(0, lease) < int64(wdInterval) {
		lease++
	}
	for leaseEnd(0, lease) > int64(wdInterval) {
		lease--
	}
	m := f.lock("edge", WithLeaseTime(lease))
	f.clk.Advance(wdInterval - f.c.w.slack/2)
	f.lock("other") // kicks the scheduler inside the slack window
	f.noPass()
	f.clk.Advance(f.c.w.slack)
	waitClosed(t, m.Done(), "the fixed lease's end")
}
