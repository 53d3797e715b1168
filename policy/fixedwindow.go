package policy

import "time"

// FixedWindow counts cost per key in aligned windows (e.g. calendar
// minutes: the counter resets at :00). It tolerates a burst at a window
// edge by design: it is the hard cap, and the pacer smooths what it lets
// through. It can charge after the fact (token usage known at the end of
// a response) and refund a reservation.
//
// FixedWindow is safe for concurrent use and never starts a goroutine;
// past windows are dropped by a sweep of a few entries per call. Make it
// with [NewFixedWindow].
type FixedWindow struct {
	window int64 // ns
	limit  int64 // for the fixed-parameter form
	reason Reason
	keys   store[fwState]
}

type fwState struct {
	win   int64 // window index: UnixNano / window
	count int64
}

// NewFixedWindow returns a counter over aligned windows of the given
// length (> 0), whose fixed-parameter form ([FixedWindow.AllowAt]) admits
// limit requests per window.
func NewFixedWindow(window time.Duration, limit int64) *FixedWindow {
	if window <= 0 {
		panic("policy: FixedWindow window must be > 0")
	}
	w := &FixedWindow{window: int64(window), limit: limit, reason: ReasonRPM}
	w.keys.init(numShards, func(s *fwState, now int64) bool { return s.win < w.index(now) })
	return w
}

// index returns the window number of t (ns since the Unix epoch), rounding
// towards -∞ so windows stay aligned before 1970 too.
func (w *FixedWindow) index(t int64) int64 {
	i := t / w.window
	if t%w.window < 0 {
		i--
	}
	return i
}

// AllowAt implements [Limiter.AllowAt] with the limit given at
// construction.
func (w *FixedWindow) AllowAt(now time.Time, k Key) Decision {
	d, _ := w.ReserveAt(now, k, w.limit, 1)
	return d
}

// ReserveAt charges cost to k's current window if it fits under limit and
// returns the window charged (for [FixedWindow.AdjustAt]). A denied call
// charges nothing; its RetryAfter is the end of the window. A cost above
// the whole limit is let in alone, into an empty window, so that it is not
// starved forever. limit <= 0 means no cap (always allowed, not counted).
func (w *FixedWindow) ReserveAt(now time.Time, k Key, limit, cost int64) (Decision, int64) {
	t := now.UnixNano()
	cur := w.index(t)
	if limit <= 0 {
		return Decision{Allowed: true, Reason: ReasonOK}, cur
	}
	sh, h := w.keys.lock(k)
	defer sh.mu.Unlock()
	s, _ := sh.getOrAdd(&w.keys, k, h, t)
	w.roll(s, cur)
	reset := time.Duration((s.win+1)*w.window - t)
	if s.count > 0 && s.count+cost > limit {
		return Decision{Limit: limit, Remaining: max(limit-s.count, 0), RetryAfter: reset, Reset: reset, Reason: w.reason}, s.win
	}
	s.count += cost
	return Decision{Allowed: true, Limit: limit, Remaining: max(limit-s.count, 0), Reset: reset, Reason: ReasonOK}, s.win
}

// roll moves s to window cur. A clock that went back keeps the newer
// window, so a jump back never hands out a fresh window. requires mu held
func (w *FixedWindow) roll(s *fwState, cur int64) {
	if cur > s.win {
		*s = fwState{win: cur}
	}
}

// AddAt charges cost to k's current window without checking any limit:
// usage reported after the fact. It returns the window charged.
func (w *FixedWindow) AddAt(now time.Time, k Key, cost int64) int64 {
	t := now.UnixNano()
	sh, h := w.keys.lock(k)
	defer sh.mu.Unlock()
	s, _ := sh.getOrAdd(&w.keys, k, h, t)
	w.roll(s, w.index(t))
	s.count += cost
	return s.win
}

// AdjustAt adds delta (negative to refund) to window win of k if that is
// still k's current window, never taking the count below zero. It
// reports whether it applied.
func (w *FixedWindow) AdjustAt(now time.Time, k Key, win, delta int64) bool {
	t := now.UnixNano()
	sh, h := w.keys.lock(k)
	defer sh.mu.Unlock()
	s := sh.get(&w.keys, k, h, t)
	if s == nil {
		return false
	}
	w.roll(s, w.index(t))
	if s.win != win {
		return false
	}
	s.count = max(s.count+delta, 0)
	return true
}

// Window returns the index of the window holding now.
func (w *FixedWindow) Window(now time.Time) int64 { return w.index(now.UnixNano()) }

// UsageAt returns k's count in the current window and how long until it
// resets.
func (w *FixedWindow) UsageAt(now time.Time, k Key) (count int64, reset time.Duration) {
	t := now.UnixNano()
	sh, h := w.keys.lock(k)
	defer sh.mu.Unlock()
	win := w.index(t)
	if s := sh.get(&w.keys, k, h, t); s != nil {
		w.roll(s, win)
		count, win = s.count, s.win
	}
	return count, time.Duration((win+1)*w.window - t)
}

// WaitAt returns how long until cost would fit under limit for k (0 if it
// fits now), without charging anything.
func (w *FixedWindow) WaitAt(now time.Time, k Key, limit, cost int64) time.Duration {
	if limit <= 0 {
		return 0
	}
	count, reset := w.UsageAt(now, k)
	if count > 0 && count+cost > limit {
		return reset
	}
	return 0
}

// Len returns the number of keys currently held.
func (w *FixedWindow) Len() int { return w.keys.len() }
