package policy

import "time"

// SlidingWindowLog is an exact sliding-window counter: it stores the
// timestamp of every admitted request per key, drops those older than the
// window, and rejects when the log is already at the limit. Memory is one
// int64 per admitted request in the window.
//
// SlidingWindowLog is safe for concurrent use and never starts a
// goroutine; keys whose log has emptied are dropped by a sweep of a few
// entries per call. Make it with [NewSlidingWindowLog].
type SlidingWindowLog struct {
	clock  Clock
	epoch  time.Time
	window int64
	limit  int64 // for the fixed-parameter form
	keys   store[tsLog]
}

// NewSlidingWindowLog returns a log over the given window (> 0) whose
// fixed-parameter form admits limit requests per window.
func NewSlidingWindowLog(window time.Duration, limit int64, opts ...LimiterOption) *SlidingWindowLog {
	if window <= 0 {
		panic("policy: SlidingWindowLog window must be > 0")
	}
	o := buildOptions(opts)
	l := &SlidingWindowLog{clock: o.clock, epoch: o.clock.Now(), window: int64(window), limit: limit}
	l.keys.init(numShards, func(s *tsLog, now int64) bool { return s.empty(now, l.window) })
	return l
}

// Allow implements [Limiter.Allow].
func (l *SlidingWindowLog) Allow(k Key) Decision { return l.AllowAt(l.clock.Now(), k) }

// AllowAt implements [Limiter.AllowAt] with the limit given at
// construction.
func (l *SlidingWindowLog) AllowAt(now time.Time, k Key) Decision {
	return l.CheckAt(now, k, l.limit)
}

// CheckAt admits one request for k if fewer than limit were admitted in
// the window ending at now, and records it. limit <= 0 means no cap
// (allowed, not recorded).
func (l *SlidingWindowLog) CheckAt(now time.Time, k Key, limit int64) Decision {
	if limit <= 0 {
		return Decision{Allowed: true, Reason: ReasonOK}
	}
	t := int64(now.Sub(l.epoch))
	sh, h := l.keys.lock(k)
	defer sh.mu.Unlock()
	s, _ := sh.getOrAdd(&l.keys, k, h, t)
	t = s.clamp(t)
	return s.check(t, l.window, limit)
}

// Len returns the number of keys currently held.
func (l *SlidingWindowLog) Len() int { return l.keys.len() }

// tsLog is a ring buffer of ascending timestamps (ns). The zero value is
// an empty log. Not safe for concurrent use: its owner's shard lock
// guards it.
type tsLog struct {
	buf  []int64
	head int
	n    int
}

func (s *tsLog) at(i int) int64 { return s.buf[(s.head+i)%len(s.buf)] }

// clamp returns t, or the newest timestamp if the clock went back before
// it, so the log stays ascending and a jump back admits nothing extra.
func (s *tsLog) clamp(t int64) int64 {
	if s.n > 0 {
		return max(t, s.at(s.n-1))
	}
	return t
}

// prune drops timestamps that are a whole window old.
func (s *tsLog) prune(t, window int64) {
	for s.n > 0 && s.buf[s.head] <= t-window {
		s.head = (s.head + 1) % len(s.buf)
		s.n--
	}
}

// empty reports whether the log holds nothing inside the window at t.
func (s *tsLog) empty(t, window int64) bool {
	return s.n == 0 || s.at(s.n-1) <= t-window
}

// check prunes, then admits and records t if fewer than limit remain.
func (s *tsLog) check(t, window, limit int64) Decision {
	s.prune(t, window)
	if int64(s.n) >= limit {
		return Decision{Limit: limit, RetryAfter: s.wait(t, window, limit),
			Reset: s.reset(t, window), Reason: ReasonRPM}
	}
	s.push(t)
	return Decision{Allowed: true, Limit: limit, Remaining: limit - int64(s.n),
		Reset: s.reset(t, window), Reason: ReasonOK}
}

// wait returns how long after t until fewer than limit timestamps are in
// the window: when the (n-limit)th oldest one ages out. The log is pruned.
func (s *tsLog) wait(t, window, limit int64) time.Duration {
	if int64(s.n) < limit {
		return 0
	}
	return time.Duration(s.at(s.n-int(limit)) + window - t)
}

// reset returns how long until the log is empty.
func (s *tsLog) reset(t, window int64) time.Duration {
	if s.n == 0 {
		return 0
	}
	return time.Duration(s.at(s.n-1) + window - t)
}

func (s *tsLog) push(t int64) {
	if s.n == len(s.buf) {
		grown := make([]int64, max(4, 2*len(s.buf)))
		for i := range s.n {
			grown[i] = s.at(i)
		}
		s.buf, s.head = grown, 0
	}
	s.buf[(s.head+s.n)%len(s.buf)] = t
	s.n++
}

// remove deletes the newest occurrence of t, if any (a refund).
func (s *tsLog) remove(t int64) bool {
	for i := s.n - 1; i >= 0; i-- {
		if s.at(i) == t {
			for j := i; j < s.n-1; j++ {
				s.buf[(s.head+j)%len(s.buf)] = s.at(j + 1)
			}
			s.n--
			return true
		}
	}
	return false
}
