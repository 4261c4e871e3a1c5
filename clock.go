package dlock

import "time"

// clock is the watchdog's view of time, so that its deadline logic can be
// tested without sleeping. Times it returns must carry a monotonic reading.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) timer
}

// timer is the part of *time.Timer the watchdog uses.
type timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }

func (r realTimer) Stop() { r.t.Stop() }
