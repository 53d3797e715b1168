package policy

import (
	"math"
	"time"
)

// TokenBucket is a keyed token bucket: each key holds up to capacity
// tokens, refilled continuously at refill tokens/s. The refill is applied
// before the spend: tokens = min(capacity, tokens + elapsed*refill).
//
// TokenBucket is safe for concurrent use and never starts a goroutine;
// full buckets (indistinguishable from new ones) are dropped by a sweep of
// a few entries per call. Make it with [NewTokenBucket].
type TokenBucket struct {
	epoch  time.Time    // time line origin: states keep int64 ns since epoch
	params BucketParams // for the fixed-parameter form
	keys   store[bucket]
}

// BucketParams are a bucket's size and refill rate, which may differ per
// call (limits change at runtime). The zero value is a bucket that holds
// nothing and never refills.
type BucketParams struct {
	Capacity float64 // max tokens; a new bucket starts full
	Refill   float64 // tokens per second
}

// NewTokenBucket returns a keyed bucket whose fixed-parameter form uses p.
func NewTokenBucket(p BucketParams) *TokenBucket {
	b := &TokenBucket{epoch: time.Now(), params: p}
	b.keys.init(numShards, func(s *bucket, now int64) bool { return s.full(now) })
	return b
}

// AllowAt implements [Limiter.AllowAt]: cost 1 with the construction
// parameters.
func (b *TokenBucket) AllowAt(now time.Time, k Key) Decision {
	d, _ := b.TakeAt(now, k, 1, b.params)
	return d
}

// TakeAt refills k's bucket to now, then spends cost if the bucket holds
// it. A denial spends and changes nothing; its RetryAfter is exactly when
// the refill covers the deficit (never, saturated, if cost exceeds the
// capacity or nothing refills). A cost that is not > 0 is an error.
func (b *TokenBucket) TakeAt(now time.Time, k Key, cost float64, p BucketParams) (Decision, error) {
	if !(cost > 0) {
		return Decision{}, ErrInvalidCost
	}
	t := int64(now.Sub(b.epoch))
	sh, h := b.keys.lock(k)
	defer sh.mu.Unlock()
	s, fresh := sh.getOrAdd(&b.keys, k, h, t)
	if fresh {
		s.fill(t, p)
	}
	return s.take(t, cost, p), nil
}

// WaitAt returns how long until TakeAt would allow cost for k under p,
// without spending anything.
func (b *TokenBucket) WaitAt(now time.Time, k Key, cost float64, p BucketParams) time.Duration {
	t := int64(now.Sub(b.epoch))
	sh, h := b.keys.lock(k)
	defer sh.mu.Unlock()
	s := sh.get(&b.keys, k, h, t)
	if s == nil {
		s = &bucket{} // a key not held is a fresh, full bucket
		s.fill(t, p)
	}
	return s.wait(t, cost, p)
}

// RefundAt gives cost back to k's bucket, up to its capacity (an allowed
// TakeAt whose request never reached the model). A key not held is full
// already, so nothing happens.
func (b *TokenBucket) RefundAt(now time.Time, k Key, cost float64) {
	t := int64(now.Sub(b.epoch))
	sh, h := b.keys.lock(k)
	defer sh.mu.Unlock()
	if s := sh.get(&b.keys, k, h, t); s != nil {
		s.refund(t, cost)
	}
}

// Len returns the number of keys currently held.
func (b *TokenBucket) Len() int { return b.keys.len() }

// Sweep drops the full buckets (which behave as absent ones) among a few
// entries of every shard at now. Adding a key sweeps its shard already;
// Sweep is for a caller that bounds its keys and adds none while at the
// bound, so that the idle ones still make room. It costs one lock per
// shard.
func (b *TokenBucket) Sweep(now time.Time) { b.keys.sweepAll(int64(now.Sub(b.epoch))) }

// bucket is one key's token count at time last. It changes only on a
// spend (or a refund), so that the refill from last is one deterministic
// function of time and RetryAfter can be exact. Guarded by its owner's
// shard lock.
type bucket struct {
	tokens float64
	last   int64
	p      BucketParams // as of the last call, for the idle check
}

func (s *bucket) fill(t int64, p BucketParams) { *s = bucket{tokens: p.Capacity, last: t, p: p} }

// level returns the tokens at t (never before last: a clock that went
// back refills nothing).
func (s *bucket) level(t int64, p BucketParams) float64 {
	el := max(t-s.last, 0)
	return min(p.Capacity, s.tokens+float64(el)*p.Refill/1e9)
}

func (s *bucket) full(t int64) bool { return s.level(t, s.p) >= s.p.Capacity }

// take spends cost at t if the bucket holds it.
func (s *bucket) take(t int64, cost float64, p BucketParams) Decision {
	s.p = p
	lvl := s.level(t, p)
	if lvl < cost {
		w := s.wait(t, cost, p)
		return Decision{Limit: int64(p.Capacity), Remaining: int64(lvl),
			RetryAfter: w, Reset: s.wait(t, p.Capacity, p), Reason: ReasonBurst}
	}
	s.tokens, s.last = lvl-cost, max(t, s.last)
	return Decision{Allowed: true, Limit: int64(p.Capacity), Remaining: int64(s.tokens),
		Reset: s.wait(t, p.Capacity, p), Reason: ReasonOK}
}

// wait returns how long after t until the bucket holds cost, found from
// the same level function that decides, so that it is exact to the
// nanosecond despite float rounding. A wait beyond maxInterval (or
// never) saturates to the largest Duration.
func (s *bucket) wait(t int64, cost float64, p BucketParams) time.Duration {
	if s.level(t, p) >= cost {
		return 0
	}
	from := max(t, s.last)
	need := (cost - s.level(from, p)) / p.Refill * 1e9 // ns
	if cost > p.Capacity || !(need < float64(maxInterval)) {
		return time.Duration(math.MaxInt64)
	}
	est := int64(math.Ceil(need)) + from - t
	// The estimate is near, but float rounding (coarse when the bucket
	// is large) can put it off by many ns: search for the exact first
	// instant, widening a bracket around est and then bisecting.
	ok := func(w int64) bool { return s.level(t+w, p) >= cost }
	lo, hi := est-1, est // invariant once bracketed: !ok(lo), ok(hi)
	for d := int64(1); !ok(hi); d *= 2 {
		lo, hi = hi, est+d
	}
	for d := int64(1); lo >= 0 && ok(lo); d *= 2 {
		hi, lo = lo, est-1-d
	}
	if lo < 0 {
		lo = -1 // ok(0) is false: checked on entry
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return time.Duration(hi)
}

// refund gives cost back, up to the capacity.
func (s *bucket) refund(t int64, cost float64) {
	lvl := s.level(t, s.p)
	s.tokens, s.last = min(s.p.Capacity, lvl+cost), max(t, s.last)
}
