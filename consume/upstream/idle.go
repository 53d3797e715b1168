package upstream

import (
	"context"
	"sync/atomic"
	"time"
)

// idleTimer aborts a stream whose upstream is silent too long. It runs
// only while the relay waits for the upstream (between arm and disarm),
// so a client slow to read never counts against the upstream. The zero
// timeout disables it. It is used by one goroutine; the timer's callback
// only sets fired and calls stop, which is safe concurrently.
type idleTimer struct {
	d     time.Duration
	stop  context.CancelFunc
	t     *time.Timer
	fired atomic.Bool
}

func newIdleTimer(d time.Duration, stop context.CancelFunc) *idleTimer {
	return &idleTimer{d: d, stop: stop}
}

// arm starts (or restarts) the countdown.
func (it *idleTimer) arm() {
	if it.d <= 0 {
		return
	}
	if it.t == nil {
		it.t = time.AfterFunc(it.d, it.expire)
		return
	}
	it.t.Reset(it.d)
}

func (it *idleTimer) expire() {
	it.fired.Store(true)
	it.stop()
}

// disarm pauses the countdown and reports whether it ran out.
func (it *idleTimer) disarm() bool {
	if it.t != nil {
		it.t.Stop()
	}
	return it.fired.Load()
}

// close ends the timer for good.
func (it *idleTimer) close() {
	if it.t != nil {
		it.t.Stop()
	}
}
