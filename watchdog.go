package dlock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The watchdog belongs to a Client. One goroutine (the scheduler) keeps every
// watched entry in a heap ordered by its next event: a renewal that is due, or
// the deadline at which an unconfirmed lease counts as lost. A second goroutine
// (the renewer) does the I/O: each pass sends every due renewal, in batches of
// up to the batch size, and every pending orphan release in one pipeline, so a
// pass costs one round trip per node however many locks are held. Deadlines are
// enforced by the scheduler's own timer, never by a Redis call returning, so a
// frozen server cannot keep a hold alive past its lease.
type watchdog struct {
	c     *Client
	clk   clock
	epoch time.Time

	interval time.Duration // between renewals of one lock
	retry    time.Duration // after a renewal that failed to reach Redis
	slack    time.Duration // renewals due this soon join the current pass

	mu      sync.Mutex
	q       entryHeap
	pending []*entry // due, waiting for the renewer
	closed  bool
	notes   []func() // log lines to write once mu is released
	wakeAt  int64    // when the scheduler will next wake by itself
	stats   Stats
	orphans int        // orphan entries in q
	passed  *sync.Cond // on mu: broadcast after every pass (see settle)

	kick  chan struct{} // wakes the scheduler
	ready chan struct{} // wakes the renewer
	stop  chan struct{}
	ctx   context.Context // cancelled by close: ends in-flight I/O
	abort context.CancelFunc
	wg    sync.WaitGroup

	// exec runs one pass against Redis (a seam for tests).
	exec func(ctx context.Context, batch []*entry) []result
}

type entryKind uint8

const (
	kindRenew  entryKind = iota // a hold the watchdog keeps alive
	kindFixed                   // a hold with a fixed lease: only its deadline is watched
	kindOrphan                  // a token that may be set: deleted, best effort, until its lease ends
)

// An entry is one thing the watchdog watches. Fields are guarded by mu.
type entry struct {
	kind    entryKind
	own     *ownership // what the key holds; nil: a string holding token
	key     string
	token   string
	slot    uint16
	lease   time.Duration
	h       *hold // nil for orphans
	due     int64 // next renewal or release attempt, ns since epoch
	end     int64 // the hold's deadline, or when an orphan is given up
	busy    bool  // queued for or in the renewer
	trouble bool  // the last renewal failed to reach Redis (logged once)
	recheck uint8 // orphans: how often to look again after finding no key
	index   int   // position in the heap; -1 when not watched
}

// wantsWork reports whether the entry waits for a renewal or release attempt
// at due (rather than only for its deadline at end).
func (e *entry) wantsWork() bool {
	return !e.busy && e.kind != kindFixed && e.due < e.end
}

// label names the entry in messages: its hold's name, or its key.
func (e *entry) label() string {
	if e.h != nil {
		return e.h.name
	}
	return e.key
}

// at is the entry's next event.
func (e *entry) at() int64 {
	if e.wantsWork() {
		return e.due
	}
	return e.end
}

// result is the outcome of one entry's renewal or release in a pass.
type result struct {
	status int64 // the script's answer for this entry
	err    error
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{
		c:        c,
		clk:      c.clk,
		epoch:    c.clk.Now(),
		interval: c.cfg.renewInterval,
		retry:    min(max(c.cfg.renewInterval/10, 5*time.Millisecond), time.Second),
		slack:    c.cfg.renewInterval / 10,
		kick:     make(chan struct{}, 1),
		ready:    make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	w.passed = sync.NewCond(&w.mu)
	w.ctx, w.abort = context.WithCancel(context.Background())
	w.exec = c.st.pass
	w.wg.Add(2)
	go w.schedule()
	go w.renewer()
	return w
}

func (w *watchdog) now() int64 { return int64(w.clk.Now().Sub(w.epoch)) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// watch starts watching a hold confirmed by a call sent at start. It fails
// with ErrClosed once the Client is closing.
func (w *watchdog) watch(h *hold, start int64, lease time.Duration, renew bool) error {
	e := &h.ent
	*e = entry{kind: kindFixed, own: h.own, key: h.relKeys[0], token: h.token, lease: lease, h: h, index: -1}
	if renew {
		e.kind = kindRenew
	}
	e.slot = slotOf(e.key)
	e.end = leaseEnd(start, lease)
	e.due = after(start, w.interval)
	h.deadline.Store(e.end)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	heap.Push(&w.q, e)
	w.stats.Held++
	if e.at() < w.wakeAt { // else the scheduler wakes in time by itself
		signal(w.kick)
	}
	return nil
}

// confirmed records a renewal of h sent at start that Redis confirmed outside
// the watchdog (a reentrant Lock).
func (w *watchdog) confirmed(h *hold, start int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := &h.ent
	if e.index < 0 {
		return
	}
	if end := leaseEnd(start, e.lease); end > e.end {
		e.end = end
		h.deadline.Store(end)
	}
	if due := after(start, w.interval); due > e.due {
		e.due = due
	}
	heap.Fix(&w.q, e.index)
}

// hook records the stop function of the hook that releases h when its Lock
// context ends, and stops it at once if h has already ended.
func (w *watchdog) hook(h *hold, stop func() bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.ent.index < 0 {
		stop()
		return
	}
	h.stopHook = stop
}

// unwatch stops watching h and reports whether it was still watched, that is,
// whether it had not yet ended by loss, by its context or by Close.
func (w *watchdog) unwatch(h *hold) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := &h.ent
	if e.index < 0 {
		return false
	}
	w.drop(e)
	return true
}

// drop removes a hold's entry from the heap and stops its context hook.
// Called with mu held.
func (w *watchdog) drop(e *entry) {
	if e.index >= 0 {
		heap.Remove(&w.q, e.index)
		if e.h != nil {
			w.stats.Held--
		}
	}
	if e.h != nil && e.h.stopHook != nil {
		e.h.stopHook()
		e.h.stopHook = nil
	}
}

// released handles a hold whose Lock context ended: it stops watching it,
// deletes its key in the background, and ends it with the context's cause.
func (w *watchdog) released(h *hold) {
	w.mu.Lock()
	if e := &h.ent; e.index >= 0 {
		w.drop(e)
		w.pushOrphan(e.own, e.key, e.token, e.slot, e.lease, 0)
	}
	w.mu.Unlock()
	h.finish(context.Cause(h.lockCtx))
}

// abandon ends h with cause, if it is still watched, and deletes its key in
// the background (token-checked): a MultiMutex lets go of its other locks
// when one is lost. It does no I/O itself.
func (w *watchdog) abandon(h *hold, cause error) {
	w.mu.Lock()
	e := &h.ent
	watched := e.index >= 0
	if watched {
		w.drop(e)
		w.pushOrphan(e.own, e.key, e.token, e.slot, e.lease, 0)
	}
	w.mu.Unlock()
	if watched {
		h.finish(cause)
	}
}

// settle runs at once, and waits for, every background release still pending
// for token on key. A handle whose token is stable across its holds (an
// owner field of Redisson's layout) settles before it acquires, so that a
// release meant for its previous hold cannot land on its next one.
func (w *watchdog) settle(ctx context.Context, key, token string) error {
	w.mu.Lock()
	var mine []*entry
	for {
		mine = mine[:0]
		if w.orphans == 0 || w.closed {
			break
		}
		busy := false
		for _, e := range w.q {
			if e.kind == kindOrphan && e.key == key && e.token == token {
				busy = busy || e.busy
				mine = append(mine, e)
			}
		}
		if !busy {
			break
		}
		w.passed.Wait() // one is in the renewer's pass now: let it land
	}
	for _, e := range mine {
		heap.Remove(&w.q, e.index)
		w.orphans--
	}
	w.mu.Unlock()
	if len(mine) == 0 {
		return nil
	}
	for _, r := range w.c.st.pass(ctx, mine) {
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// orphan queues a best-effort, token-checked delete of key, retried while
// Redis cannot be reached until the lease it may have been set with has run
// out. It is used when Unlock could not reach Redis.
func (w *watchdog) orphan(own *ownership, key, token string, lease time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pushOrphan(own, key, token, slotOf(key), lease, 0)
}

// orphanAcquire queues the delete of a token whose acquire may still be on
// its way to Redis: finding no key, it looks again a few times.
func (w *watchdog) orphanAcquire(own *ownership, key, token string, lease time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pushOrphan(own, key, token, slotOf(key), lease, 3)
}

// lose ends a watched hold as lost. Called with mu held.
func (w *watchdog) lose(e *entry, why string) {
	w.drop(e)
	w.stats.Losses++
	h, cause := e.h, lostErr(e.h.name, why)
	if h.mark(cause) {
		w.note(func() { h.announce(cause) })
	}
	key := e.label()
	w.note(func() { w.c.log.Warn("dlock: lock lost", "name", key, "reason", why) })
}

// note queues a log line; logging waits until mu is released, so a slow log
// handler never holds up the watchdog. Called with mu held.
func (w *watchdog) note(f func()) { w.notes = append(w.notes, f) }

// unlock releases mu, then writes the queued log lines.
func (w *watchdog) unlock() {
	notes := w.notes
	w.notes = nil
	w.mu.Unlock()
	for _, f := range notes {
		f()
	}
}

// schedule is the scheduler goroutine.
func (w *watchdog) schedule() {
	defer w.wg.Done()
	t := w.clk.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		next, work := w.tick()
		w.wakeAt = w.now() + int64(next)
		w.unlock()
		if work {
			signal(w.ready)
		}
		t.Reset(next)
		select {
		case <-t.C():
		case <-w.kick:
		case <-w.stop:
			return
		}
	}
}

// tick handles every event that is due and returns the time until the next
// one, and whether it queued work for the renewer. Called with mu held.
func (w *watchdog) tick() (time.Duration, bool) {
	now := w.now()
	work := false
	for w.q.Len() > 0 {
		e := w.q[0]
		switch {
		case e.end <= now:
			w.expire(e)
		case e.wantsWork() && e.due <= now+int64(w.slack):
			e.busy = true
			w.pending = append(w.pending, e)
			heap.Fix(&w.q, 0)
			work = true
		default:
			return time.Duration(e.at() - now), work
		}
	}
	return time.Hour, work
}

// expire handles an entry whose deadline has passed. Called with mu held.
func (w *watchdog) expire(e *entry) {
	switch e.kind {
	case kindOrphan:
		heap.Remove(&w.q, e.index)
		w.orphans--
	case kindFixed:
		w.lose(e, "its fixed lease ran out")
	default:
		why := "its lease ran out before a renewal was confirmed"
		if e.trouble {
			why = "renewals could not reach Redis before the lease ran out"
		}
		w.lose(e, why)
		// A renewal may have landed unconfirmed: delete the key if it is still ours.
		w.pushOrphan(e.own, e.key, e.token, e.slot, e.lease, 0)
	}
}

// pushOrphan queues an orphan delete due now. Called with mu held.
func (w *watchdog) pushOrphan(own *ownership, key, token string, slot uint16, lease time.Duration, recheck uint8) {
	if w.closed {
		return
	}
	now := w.now()
	w.orphans++
	heap.Push(&w.q, &entry{kind: kindOrphan, own: own, key: key, token: token, slot: slot, lease: lease,
		due: now, end: after(now, lease), recheck: recheck, index: -1})
	if now < w.wakeAt {
		signal(w.kick)
	}
}

// renewer is the goroutine that runs passes against Redis.
func (w *watchdog) renewer() {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case <-w.ready:
		}
		w.mu.Lock()
		batch := w.pending[:0:0]
		earliest := int64(-1)
		for _, e := range w.pending {
			if e.index >= 0 { // skip what ended while it waited
				batch = append(batch, e)
				if earliest < 0 || e.end < earliest {
					earliest = e.end
				}
			}
		}
		w.pending = w.pending[:0]
		w.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		sent := w.now()
		// Give the pass until the earliest deadline in it; past that its answer
		// no longer matters. (go-redis honours this only with ContextTimeoutEnabled.)
		ctx, cancel := context.WithTimeout(w.ctx, min(time.Duration(earliest-sent), time.Hour)+w.retry)
		res := w.exec(ctx, batch)
		cancel()
		w.mu.Lock()
		ev := w.apply(batch, res, sent)
		took := time.Duration(w.now() - sent)
		ev.Duration = took
		s := &w.stats
		s.Passes++
		s.LastPass, s.MaxPass = took, max(s.MaxPass, took)
		s.LastPassSize, s.MaxPassSize = len(batch), max(s.MaxPassSize, len(batch))
		w.passed.Broadcast()
		w.unlock()
		if o := w.c.obs; o != nil {
			o.RenewalPass(ev)
		}
		signal(w.kick)
	}
}

// apply records the results of a pass sent at sent and counts them. Called
// with mu held.
func (w *watchdog) apply(batch []*entry, res []result, sent int64) (ev PassEvent) {
	now := w.now()
	for i, e := range batch {
		e.busy = false
		r := res[i]
		switch {
		case e.kind == kindOrphan:
			ev.Released++
		case r.err == nil && r.status == 1:
			ev.Renewed++
		default:
			ev.Failed++
		}
		if e.index < 0 {
			// No longer watched: it ended while the pass was in flight. If the
			// renewal extended a key that is no longer ours to hold, delete it.
			if e.kind == kindRenew && r.err == nil && r.status == 1 && errors.Is(e.h.endErr(), ErrLockLost) {
				w.pushOrphan(e.own, e.key, e.token, e.slot, e.lease, 0)
			}
			continue
		}
		if e.kind == kindOrphan {
			again := r.err != nil && isTransient(r.err)
			if r.err == nil && r.status == 0 && e.recheck > 0 {
				e.recheck--
				again = true
			}
			if again && after(now, w.retry) < e.end {
				e.due = after(now, w.retry)
				heap.Fix(&w.q, e.index)
			} else {
				heap.Remove(&w.q, e.index)
				w.orphans--
			}
			continue
		}
		switch {
		case r.err != nil && !isTransient(r.err) && !errors.Is(r.err, ErrNotReplicated):
			w.stats.RenewalErrors++
			w.lose(e, "Redis refused the renewal: "+r.err.Error())
		case r.err != nil:
			w.stats.RenewalErrors++
			if !e.trouble {
				e.trouble = true
				key, err, left := e.label(), r.err, time.Duration(e.end-now)
				w.note(func() {
					w.c.log.Warn("dlock: renewal failed, retrying until the lease runs out",
						"name", key, "error", err, "left", left)
				})
			}
			e.due = after(now, w.retry)
			heap.Fix(&w.q, e.index)
		case r.status == 1:
			w.stats.Renewals++
			if e.trouble {
				e.trouble = false
				key := e.label()
				w.note(func() { w.c.log.Info("dlock: renewal recovered", "name", key) })
			}
			if end := leaseEnd(sent, e.lease); end > e.end {
				e.end = end
				e.h.deadline.Store(end)
			}
			e.due = after(sent, w.interval)
			heap.Fix(&w.q, e.index)
		default:
			w.lose(e, lossReason(r.status))
		}
	}
	return ev
}

// lossReason explains a script status for a key that is not ours any more.
func lossReason(status int64) string {
	switch status {
	case 0:
		return "its key expired or was deleted"
	case -1:
		return "another token holds its key"
	case -2:
		return "its key now holds another Redis type"
	default:
		return fmt.Sprintf("unexpected script status %d", status)
	}
}

// close stops the watchdog, ends every watched hold with ErrClosed and
// releases their keys and pending orphans in one pass. It returns what went
// wrong releasing holds (orphans are best effort).
func (w *watchdog) close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	entries := make([]*entry, 0, w.q.Len())
	for _, e := range w.q {
		e.index = -1
		w.drop(e)
		entries = append(entries, e)
	}
	w.stats.Held = 0
	w.q = w.q[:0]
	w.orphans = 0
	w.passed.Broadcast()
	w.pending = nil
	w.mu.Unlock()
	close(w.stop)
	w.abort()
	w.wg.Wait()

	if len(entries) == 0 {
		return nil
	}
	release := make([]*entry, len(entries))
	for i, e := range entries {
		if e.h != nil {
			e.h.finish(ErrClosed)
		}
		release[i] = &entry{kind: kindOrphan, own: e.own, key: e.key, token: e.token, slot: e.slot}
	}
	res := w.c.st.pass(ctx, release)
	var errs []error
	for i, e := range entries {
		if e.h != nil && res[i].err != nil {
			errs = append(errs, redisErr("release on close", e.label(), res[i].err))
		}
	}
	return errors.Join(errs...)
}

// entryHeap orders entries by their next event.
type entryHeap []*entry

func (q entryHeap) Len() int           { return len(q) }
func (q entryHeap) Less(i, j int) bool { return q[i].at() < q[j].at() }
func (q entryHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *entryHeap) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*q = old[:len(old)-1]
	return e
}

// loseHold ends h as lost for a reason found outside the watchdog.
func (w *watchdog) loseHold(h *hold, why string) {
	w.mu.Lock()
	defer w.unlock()
	if h.ent.index >= 0 {
		w.lose(&h.ent, why)
	}
}
