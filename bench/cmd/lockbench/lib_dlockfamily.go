package main

import (
	"context"

	"github.com/dlock-go/dlock"
)

// The synchronizers beyond Mutex get rows of their own in the uncontended,
// allocation and contended tables, used as mutexes: the RWMutex by its write
// lock and by its read lock, the Semaphore with one permit. They are not
// peers (the targets compare dlock's Mutex with the other libraries) and do
// not run the watchdog scenario, which is the Mutex's.

// openDlockRW opens a dlock Client whose handles are RWMutex write locks.
func openDlockRW(addr string, watchdog bool) (lib, error) {
	l, err := openDlock(addr, watchdog)
	if err != nil {
		return nil, err
	}
	return &dlockFamilyLib{dlockLib: l.(*dlockLib), kind: "rw"}, nil
}

// openDlockRead opens a dlock Client whose handles are RWMutex read locks.
func openDlockRead(addr string, watchdog bool) (lib, error) {
	l, err := openDlock(addr, watchdog)
	if err != nil {
		return nil, err
	}
	return &dlockFamilyLib{dlockLib: l.(*dlockLib), kind: "read"}, nil
}

// openDlockSem opens a dlock Client whose handles are one-permit semaphores.
func openDlockSem(addr string, watchdog bool) (lib, error) {
	l, err := openDlock(addr, watchdog)
	if err != nil {
		return nil, err
	}
	return &dlockFamilyLib{dlockLib: l.(*dlockLib), kind: "sem"}, nil
}

type dlockFamilyLib struct {
	*dlockLib
	kind string
}

func (l *dlockFamilyLib) mutex(name string) mutex {
	switch l.kind {
	case "rw":
		return &rwWrite{m: l.c.NewRWMutex(name)}
	case "read":
		return &rwRead{m: l.c.NewRWMutex(name)}
	default:
		s := l.c.NewSemaphore(name)
		_, _ = s.TrySetPermits(context.Background(), 1)
		return &semMutex{s: s}
	}
}

type rwWrite struct{ m *dlock.RWMutex }

func (m *rwWrite) lock(ctx context.Context) error   { return m.m.Lock(ctx) }
func (m *rwWrite) unlock(ctx context.Context) error { return m.m.Unlock(ctx) }

type rwRead struct{ m *dlock.RWMutex }

func (m *rwRead) lock(ctx context.Context) error   { return m.m.RLock(ctx) }
func (m *rwRead) unlock(ctx context.Context) error { return m.m.RUnlock(ctx) }

type semMutex struct{ s *dlock.Semaphore }

func (m *semMutex) lock(ctx context.Context) error   { return m.s.Acquire(ctx, 1) }
func (m *semMutex) unlock(ctx context.Context) error { return m.s.Release(ctx, 1) }
