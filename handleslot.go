package dlock

import (
	"context"
	"fmt"
	"time"
)

// takeSlot waits for a handle's local slot (a channel of capacity one, full
// while the handle holds or acquires), so that goroutines sharing a handle
// exclude each other before they contend in Redis. It returns false and nil
// when a bounded wait runs out at until; an error when ctx ends (op and name
// describe the call) or the Client closes.
func (c *Client) takeSlot(ctx context.Context, slot chan struct{}, op, name string, bounded bool, until time.Time) (bool, error) {
	select {
	case slot <- struct{}{}:
		return true, nil
	default:
	}
	var expired <-chan time.Time
	if bounded {
		left := time.Until(until)
		if left <= 0 {
			return false, nil
		}
		t := time.NewTimer(left)
		defer t.Stop()
		expired = t.C
	}
	select {
	case slot <- struct{}{}:
		return true, nil
	case <-expired:
		return false, nil
	case <-ctx.Done():
		return false, ctxErr(ctx, op, name, nil)
	case <-c.closing:
		return false, fmt.Errorf("dlock: %s %s: %w", op, quote(name), ErrClosed)
	}
}
