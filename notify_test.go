package dlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func pending(ws ...*waiter) (n int) {
	for _, w := range ws {
		n += len(w.ch)
	}
	return n
}

// A notice wakes exactly one local waiter of its name, the next notice
// another one, and notices for other names of the same channel wake nobody.
func TestNotifierWakesOneWaiterPerNotice(t *testing.T) {
	c, mr, _ := newMini(t)
	ctx := context.Background()
	var ws []*waiter
	for range 3 {
		w := c.n.join(ctx, "lock:n", time.Second)
		require.NotNil(t, w, "join returns a confirmed waiter")
		ws = append(ws, w)
	}
	require.Equal(t, 0, pending(ws...))

	mr.Publish(noticeChannel("lock:n"), "another name in the same slot")
	mr.Publish(noticeChannel("lock:n"), "lock:n")
	waitFor(t, "one wake-up", func() bool { return pending(ws...) == 1 })
	woken := -1
	for i, w := range ws {
		if len(w.ch) == 1 {
			woken = i
		}
	}
	mr.Publish(noticeChannel("lock:n"), "lock:n")
	waitFor(t, "a second waiter woken", func() bool { return pending(ws...) == 2 })
	require.Len(t, ws[woken].ch, 1, "the first waiter still has exactly one wake-up")

	// A waiter that leaves with an unused wake-up passes it on.
	<-ws[woken].ch
	other := -1
	for i, w := range ws {
		if i != woken && len(w.ch) == 1 {
			other = i
		}
	}
	c.n.leave(ws[other])
	waitFor(t, "the wake-up passed on", func() bool {
		for i, w := range ws {
			if i != other && len(w.ch) == 1 {
				return true
			}
		}
		return false
	})
	for i, w := range ws {
		if i != other {
			c.n.leave(w)
		}
	}
}

// One subscription connection per Client, one subscription per channel, and
// an unused channel is unsubscribed after the linger time.
func TestNotifierSharesAndSweeps(t *testing.T) {
	c, mr, _ := newMini(t)
	c.n.linger = 20 * time.Millisecond
	ctx := context.Background()
	a := c.n.join(ctx, "lock:a", time.Second)
	b := c.n.join(ctx, "lock:b", time.Second)
	require.NotNil(t, a)
	require.NotNil(t, b)
	c.n.mu.Lock()
	require.Len(t, c.n.conns, 1, "one subscription connection")
	c.n.mu.Unlock()
	want := 1
	if noticeChannel("lock:a") != noticeChannel("lock:b") {
		want = 2
	}
	require.Len(t, mr.PubSubChannels(""), want)
	c.n.leave(a)
	c.n.leave(b)
	waitFor(t, "idle channels unsubscribed", func() bool { return len(mr.PubSubChannels("")) == 0 })
}

func TestWithoutPubSubHasNoNotifier(t *testing.T) {
	c, _, _ := newMini(t, WithoutPubSub())
	require.Nil(t, c.n)
	require.Empty(t, c.pub)
}

// The channel of a name is in the name's own hash slot.
func TestNoticeChannelSharesTheLockSlot(t *testing.T) {
	for _, name := range []string{"a", "lock:order:1001", "{user}:x", "a{}b", "{", "}{"} {
		require.Equal(t, slotOf(name), slotOf(noticeChannel(name)), name)
		require.Equal(t, slotOf(name), slotOf(fenceKey(name)), name)
	}
}

// Stats count holds, passes and renewals.
func TestStatsCountWatchdogWork(t *testing.T) {
	f := newWatchdogFixture(t)
	m := f.lock("s1")
	f.lock("s2")
	require.Equal(t, 2, f.c.Stats().Held)
	f.clk.Advance(wdInterval)
	f.nextPass().answer(1, nil)
	waitFor(t, "the pass counted", func() bool { return f.c.Stats().Passes == 1 })
	s := f.c.Stats()
	require.Equal(t, uint64(2), s.Renewals)
	require.Equal(t, 2, s.LastPassSize)
	require.NoError(t, m.Unlock(context.Background()))
	require.Equal(t, 1, f.c.Stats().Held)
	f.clk.Advance(wdInterval)
	f.nextPass().answer(0, nil)
	waitFor(t, "the loss counted", func() bool { return f.c.Stats().Losses == 1 })
	require.Equal(t, 0, f.c.Stats().Held)
}
