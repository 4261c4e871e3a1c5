package dlock

import (
	"context"
	"errors"
)

// WithLock acquires the lock called name (waiting as Lock does), runs fn, and
// releases the lock, also when fn panics. fn gets a context that is cancelled
// as soon as the hold ends, with cause ErrLockLost when the lock is lost
// (see context.Cause), and the hold's fencing token to pass to storage.
//
// It returns Lock's error if the lock was not acquired (fn did not run), else
// fn's error joined with Unlock's. If the lock was lost while fn ran, the error
// matches ErrLockLost even when fn returned nil.
func (c *Client) WithLock(ctx context.Context, name string, fn func(ctx context.Context, token int64) error, opts ...MutexOption) (err error) {
	if fn == nil {
		return invalid("WithLock needs a function, got nil")
	}
	m := c.NewMutex(name, opts...)
	if err := m.Lock(ctx); err != nil {
		return err
	}
	h := m.current()
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h.notify(cancel)
	defer func() {
		// Release even when ctx has ended, bounded by the close timeout.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.closeTimeout)
		defer cancel()
		if uerr := m.Unlock(uctx); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(fctx, h.fence)
}
