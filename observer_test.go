package dlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu      sync.Mutex
	starts  []string
	locks   []LockEvent
	unlocks []UnlockEvent
	holds   []HoldEvent
	passes  []PassEvent
}

type ctxKey struct{}

func (r *recorder) LockStart(ctx context.Context, name string) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, "lock "+name)
	return context.WithValue(ctx, ctxKey{}, "span")
}

func (r *recorder) LockEnd(ctx context.Context, e LockEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Value(ctxKey{}) != "span" {
		panic("LockEnd did not get LockStart's context")
	}
	r.locks = append(r.locks, e)
}

func (r *recorder) UnlockStart(ctx context.Context, name string) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, "unlock "+name)
	return ctx
}

func (r *recorder) UnlockEnd(_ context.Context, e UnlockEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unlocks = append(r.unlocks, e)
}

func (r *recorder) HoldEnd(e HoldEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holds = append(r.holds, e)
}

func (r *recorder) RenewalPass(e PassEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes = append(r.passes, e)
}

func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{starts: append([]string(nil), r.starts...), locks: append([]LockEvent(nil), r.locks...),
		unlocks: append([]UnlockEvent(nil), r.unlocks...), holds: append([]HoldEvent(nil), r.holds...),
		passes: append([]PassEvent(nil), r.passes...)}
}

func TestObserverSeesEveryEvent(t *testing.T) {
	rec := &recorder{}
	c, _, _ := newMini(t, WithObserver(rec))
	ctx := context.Background()

	m := c.NewMutex("obs", WithReentrant())
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx)) // reentered
	ok, err := c.NewMutex("obs").TryLock(ctx, 0)
	require.False(t, ok)
	require.NoError(t, err)
	require.NoError(t, m.Unlock(ctx)) // counted down
	require.NoError(t, m.Unlock(ctx)) // released
	require.ErrorIs(t, m.Unlock(ctx), ErrNotHeld)

	lost := c.NewMutex("obs-lost")
	require.NoError(t, lost.Lock(ctx))
	_, err = lost.ForceUnlock(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, lost.Unlock(ctx), ErrLockLost)

	cctx, cancel := context.WithCancel(ctx)
	bound := c.NewMutex("obs-ctx")
	require.NoError(t, bound.Lock(cctx))
	cancel()
	waitFor(t, "the context's hold end", func() bool { return len(rec.snapshot().holds) == 3 })
	require.ErrorIs(t, bound.Lock(cctx), context.Canceled)

	s := rec.snapshot()
	outcomes := []LockOutcome{}
	for _, e := range s.locks {
		outcomes = append(outcomes, e.Outcome)
	}
	require.Equal(t, []LockOutcome{Acquired, Reentered, Busy, Acquired, Acquired, Canceled}, outcomes)
	require.Positive(t, s.locks[0].FencingToken)
	require.Equal(t, "obs", s.locks[0].Name)

	unlocks := []UnlockOutcome{}
	for _, e := range s.unlocks {
		unlocks = append(unlocks, e.Outcome)
	}
	require.Equal(t, []UnlockOutcome{CountedDown, Released, NotHeld, WasLost}, unlocks)

	endings := map[string]HoldEnding{}
	for _, e := range s.holds {
		endings[e.Name] = e.Ending
		require.GreaterOrEqual(t, e.Held, time.Duration(0))
	}
	require.Equal(t, map[string]HoldEnding{"obs": EndUnlocked, "obs-lost": EndLost, "obs-ctx": EndContext}, endings)
	for _, e := range s.holds {
		if e.Ending == EndLost {
			require.True(t, errors.Is(e.Cause, ErrLockLost))
		}
	}
}

func TestObserverSeesRenewalPassesAndClose(t *testing.T) {
	rec := &recorder{}
	f := newWatchdogFixture(t)
	f.c.obs = rec
	f.lock("p1")
	f.lock("p2")
	f.clk.Advance(wdInterval)
	f.nextPass().answer(1, nil)
	waitFor(t, "the pass event", func() bool { return len(rec.snapshot().passes) == 1 })
	require.Equal(t, 2, rec.snapshot().passes[0].Renewed)
	require.NoError(t, f.c.Close())
	s := rec.snapshot()
	require.Len(t, s.holds, 2)
	for _, e := range s.holds {
		require.Equal(t, EndClosed, e.Ending)
	}
}
