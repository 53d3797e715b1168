package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// idleTimer aborts a stream whose upstream is silent too long. It counts
// only while the relay waits for the upstream (between arm and disarm),
// so a client slow to read never counts against the upstream. The zero
// timeout disables it.
//
// arm and disarm are called by the relay's goroutine around every read,
// so they only store a time, read from the monotonic clock alone (one
// clock read per chunk, where time.Now takes two): one timer, which moves
// itself when it fires early, ends a wait exactly d after it began. The
// timer's callback sets fired and calls stop, which is safe concurrently.
type idleTimer struct {
	d     time.Duration
	stop  context.CancelFunc
	fired atomic.Bool
	// since is when the current wait began (an idleClock reading); 0
	// while the relay is not waiting.
	since atomic.Int64

	mu     sync.Mutex // guards t and closed, for the callback and close
	t      *time.Timer
	closed bool
}

func newIdleTimer(d time.Duration, stop context.CancelFunc) *idleTimer {
	it := new(idleTimer)
	it.init(d, stop)
	return it
}

// init starts a zero idleTimer, one held by value in a larger struct.
func (it *idleTimer) init(d time.Duration, stop context.CancelFunc) {
	it.d, it.stop = d, stop
	if d > 0 {
		it.mu.Lock()
		it.t = time.AfterFunc(d, it.expire)
		it.mu.Unlock()
	}
}

// arm starts a wait.
func (it *idleTimer) arm() {
	if it.d > 0 {
		it.since.Store(idleClock())
	}
}

// expire ends a wait that lasted d, or moves the timer to d after the
// current wait began (d from now when none is under way). The timer
// never fires later than that: it was last set d after a moment no later
// than the current wait's start.
func (it *idleTimer) expire() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.closed {
		return
	}
	since := it.since.Load()
	if since == 0 {
		it.t.Reset(it.d)
		return
	}
	if left := time.Duration(since + int64(it.d) - idleClock()); left > 0 {
		it.t.Reset(left)
		return
	}
	it.fired.Store(true)
	it.stop()
}

// idleEpoch is the origin of idleClock.
var idleEpoch = time.Now()

// idleClock is now, in ns since idleEpoch on the monotonic clock, and
// never 0 (which says no wait is under way). Only differences of its
// readings mean anything: in a synctest bubble it counts from the
// bubble's clock and is negative.
func idleClock() int64 {
	if t := int64(time.Since(idleEpoch)); t != 0 {
		return t
	}
	return 1
}

// disarm ends a wait and reports whether the timer ran out.
func (it *idleTimer) disarm() bool {
	it.since.Store(0)
	return it.fired.Load()
}

// close ends the timer for good.
func (it *idleTimer) close() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.closed = true
	if it.t != nil {
		it.t.Stop()
	}
}
