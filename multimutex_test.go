package dlock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMultiMutexRejectsBadInput(t *testing.T) {
	c, _, _ := newMini(t)
	ctx := context.Background()
	for _, tc := range []struct {
		what string
		mm   *MultiMutex
	}{
		{"no names", c.NewMultiMutex(nil)},
		{"empty name", c.NewMultiMutex([]string{"a", ""})},
		{"duplicate", c.NewMultiMutex([]string{"a", "b", "a"})},
		{"reserved", c.NewMultiMutex([]string{"dlock:fence:{x}"})},
		{"reentrant", c.NewMultiMutex([]string{"a"}, WithReentrant())},
		{"lease", c.NewMultiMutex([]string{"a"}, WithLeaseTime(-1))},
	} {
		assert.ErrorIs(t, tc.mm.Lock(ctx), ErrInvalidArgument, tc.what)
		assert.ErrorIs(t, tc.mm.Unlock(ctx), ErrInvalidArgument, tc.what)
	}
	var nilClient *Client
	assert.ErrorIs(t, nilClient.NewMultiMutex([]string{"a"}).Lock(ctx), ErrInvalidArgument)
	mm := c.NewMultiMutex([]string{"a"})
	assert.ErrorIs(t, mm.Lock(nil), ErrInvalidArgument)
	_, err := mm.TryLock(ctx, -1)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// Names are taken by slot, then by name, whatever order they were given in.
func TestMultiMutexOrder(t *testing.T) {
	c, _, _ := newMini(t)
	a := c.NewMultiMutex([]string{"x", "y", "z", "{t}1", "{t}2"}).Names()
	b := c.NewMultiMutex([]string{"{t}2", "z", "{t}1", "y", "x"}).Names()
	require.Equal(t, a, b)
	for i := 1; i < len(a); i++ {
		sa, sb := slotOf(a[i-1]), slotOf(a[i])
		assert.True(t, sa < sb || (sa == sb && a[i-1] < a[i]), "%v", a)
	}
}
