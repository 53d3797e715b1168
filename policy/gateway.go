package policy

import "time"

// GatewayLimiter admits a request for a key only when both its RPM
// sliding-window log and its burst token bucket allow it (the seed-004
// design). The RPM check runs first and records the request before the
// bucket is asked, so a BURST_LIMIT denial leaves that RPM slot counted.
// One mutex (the key's shard lock) is held across both checks, so two
// goroutines can never both spend the last burst token; each key has its
// own log and bucket.
//
// GatewayLimiter is safe for concurrent use and never starts a goroutine;
// keys with an empty log and a full bucket are dropped by a sweep of a few
// entries per call. Make it with [NewGatewayLimiter].
type GatewayLimiter struct {
	clock  Clock
	epoch  time.Time
	params GatewayParams // for the fixed-parameter form
	keys   store[gwState]
}

// GatewayParams are one key's limits, which may differ per call. The
// zero value checks nothing (every call is allowed).
type GatewayParams struct {
	RPM    int64   // requests per minute (sliding window); 0 = no RPM check
	Burst  int64   // bucket capacity; 0 = no burst check
	Refill float64 // bucket refill in tokens/s, usually RPM/60
}

// gwWindow is the RPM window.
const gwWindow = int64(time.Minute)

type gwState struct {
	log tsLog
	b   bucket
}

// NewGatewayLimiter returns a limiter whose fixed-parameter form uses p.
func NewGatewayLimiter(p GatewayParams, opts ...LimiterOption) *GatewayLimiter {
	o := buildOptions(opts)
	g := &GatewayLimiter{clock: o.clock, epoch: o.clock.Now(), params: p}
	g.keys.init(numShards, func(s *gwState, now int64) bool {
		return s.log.empty(now, gwWindow) && s.b.full(now)
	})
	return g
}

// Allow implements [Limiter.Allow].
func (g *GatewayLimiter) Allow(k Key) Decision { return g.AllowAt(g.clock.Now(), k) }

// AllowAt implements [Limiter.AllowAt]: cost 1 with the construction
// parameters.
func (g *GatewayLimiter) AllowAt(now time.Time, k Key) Decision {
	d, _ := g.TakeAt(now, k, 1, g.params)
	return d
}

// TakeAt runs the RPM check, then the burst check spending cost tokens,
// under one lock. A cost that is not > 0 is an error, not a Decision.
// RetryAfter of a denial covers both checks (the later of the two), so a
// retry then passes both. Remaining is the smaller of the two leftovers.
func (g *GatewayLimiter) TakeAt(now time.Time, k Key, cost float64, p GatewayParams) (Decision, error) {
	if !(cost > 0) {
		return Decision{}, ErrInvalidCost
	}
	if p.RPM <= 0 && p.Burst <= 0 {
		return Decision{Allowed: true, Reason: ReasonOK}, nil
	}
	t := int64(now.Sub(g.epoch))
	sh, h := g.keys.lock(k)
	defer sh.mu.Unlock()
	s, fresh := sh.getOrAdd(&g.keys, k, h, t)
	bp := BucketParams{Capacity: float64(p.Burst), Refill: p.Refill}
	if fresh {
		s.b.fill(t, bp)
	}
	t = s.log.clamp(t)
	d := Decision{Allowed: true, Remaining: -1, Reason: ReasonOK}
	if p.RPM > 0 {
		d = s.log.check(t, gwWindow, p.RPM) // records the request when allowed
	}
	if d.Allowed && p.Burst > 0 {
		bd := s.b.take(t, cost, bp)
		if !bd.Allowed || d.Remaining < 0 || bd.Remaining < d.Remaining {
			bd.RetryAfter = max(bd.RetryAfter, d.RetryAfter)
			d = bd
		}
	}
	if !d.Allowed {
		d.RetryAfter = max(d.RetryAfter, s.wait(t, cost, p, bp))
	}
	return d, nil
}

// wait returns how long until both checks would pass. requires mu held
func (s *gwState) wait(t int64, cost float64, p GatewayParams, bp BucketParams) time.Duration {
	var w time.Duration
	if p.RPM > 0 {
		w = s.log.wait(t, gwWindow, p.RPM)
	}
	if p.Burst > 0 {
		w = max(w, s.b.wait(t, cost, bp))
	}
	return w
}

// WaitAt returns how long until TakeAt would allow k at cost, without
// recording anything.
func (g *GatewayLimiter) WaitAt(now time.Time, k Key, cost float64, p GatewayParams) time.Duration {
	t := int64(now.Sub(g.epoch))
	sh, h := g.keys.lock(k)
	defer sh.mu.Unlock()
	s := sh.get(&g.keys, k, h, t)
	if s == nil {
		return 0 // a fresh key has an empty log and a full bucket
	}
	t = s.log.clamp(t)
	s.log.prune(t, gwWindow)
	return s.wait(t, cost, p, BucketParams{Capacity: float64(p.Burst), Refill: p.Refill})
}

// RefundAt undoes an allowed TakeAt made at the instant at (the request
// never reached the model): the RPM log forgets it and the bucket gets
// cost back, up to its capacity.
func (g *GatewayLimiter) RefundAt(now, at time.Time, k Key, cost float64) {
	t := int64(now.Sub(g.epoch))
	sh, h := g.keys.lock(k)
	defer sh.mu.Unlock()
	s := sh.get(&g.keys, k, h, t)
	if s == nil {
		return
	}
	s.log.remove(int64(at.Sub(g.epoch)))
	if s.b.p.Capacity > 0 {
		s.b.refund(t, cost)
	}
}

// Len returns the number of keys currently held.
func (g *GatewayLimiter) Len() int { return g.keys.len() }
