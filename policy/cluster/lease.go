package cluster

import (
	"math"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// counter names one cap of a request, in admission order (the order
// policy.Admitter checks them, so that a denial names the same reason).
type counter uint8

const (
	orgRPM counter = iota
	orgTPM
	rpm
	tpm
	burst
	numCounters
)

var counterNames = [numCounters]string{"orgrpm", "orgtpm", "rpm", "tpm", "burst"}

var counterReasons = [numCounters]policy.Reason{policy.ReasonOrgRPM, policy.ReasonOrgTPM,
	policy.ReasonRPM, policy.ReasonTPM, policy.ReasonBurst}

// window is the length of the fixed windows, as in policy.Admitter.
const window = policy.CapWindow

// windowOf returns the index of the minute holding t (unix ns, floored
// like policy.FixedWindow), shared by every replica whose clock agrees.
func windowOf(t int64) int64 {
	w := int64(window)
	i := t / w
	if t%w < 0 {
		i--
	}
	return i
}

// leaseKey identifies one lease: a cap of a bucket (an org's caps use the
// org as the tenant and no model) in one window; a burst bucket has no
// window (0).
type leaseKey struct {
	c   counter
	k   policy.Key
	win int64
}

// lease is what a replica holds of one shared counter. Guarded by the
// Admitter's mu.
type lease struct {
	balance int64 // units held and not yet used
	taken   int64 // units leased from the store in this window, net of returns
	local   int64 // units admitted from the fallback allowance in this window
	debt    int64 // usage charged after the fact, not yet sent to the store
	shared  int64 // the shared counter's use as last seen (for the headers)
	used    int64 // unix ns of the last use (idle leases go back)
	// asking counts this replica's calls to the store for this counter in
	// flight; only one of them asks for the lease's extra, so that a
	// burst of concurrent requests leases extra once, not once each.
	asking int
	// denyUntil is when a denial by the store stops being repeated
	// locally (unix ns): a replica that was told "full" does not ask
	// again for denyFor, so that a tenant over its cap costs a few round
	// trips a second, not one per request. retryAt is the denial's own
	// retry time (a burst bucket's refill).
	denyUntil, retryAt int64
}

// denyFor is how long a store's denial is repeated locally. A unit given
// back meanwhile (by another replica) waits at most this long to be used.
const denyFor = 250 * time.Millisecond

// check is one cap a request is under.
type check struct {
	c     counter
	k     policy.Key
	limit int64   // the cap; a bucket's capacity
	cost  int64   // what the request takes of it
	extra int64   // the lease's extra beyond cost
	ttlMs int64   // a window key's TTL
	rate  float64 // a bucket's refill per second
}

func (c *check) leaseKey(win int64) leaseKey {
	if c.c == burst {
		win = 0
	}
	return leaseKey{c.c, c.k, win}
}

// leaseExtra is how much a replica leases beyond a request's own need:
// limit/(16·N), at least 1. Across N replicas at most limit/16 units
// (plus the requests' own needs) are leased and unused at any time.
func leaseExtra(limit int64, replicas int) int64 {
	return max(limit/(16*int64(replicas)), 1)
}

// checks lists the caps a request of tenant for model with est tokens is
// under, skipping those without a cap or cost.
func checks(lim, org policy.Limits, tenant *policy.Tenant, k policy.Key, est int64, replicas int) []check {
	orgKey := policy.Key{Tenant: tenant.Org}
	ttl := int64(2 * window / time.Millisecond)
	all := [...]check{
		{c: orgRPM, k: orgKey, limit: org.RPM, cost: 1},
		{c: orgTPM, k: orgKey, limit: org.TPM, cost: est},
		{c: rpm, k: k, limit: lim.RPM, cost: 1},
		{c: tpm, k: k, limit: lim.TPM, cost: est},
	}
	out := make([]check, 0, numCounters)
	for _, c := range all {
		if c.limit > 0 && c.cost > 0 && (c.c > orgTPM || tenant.Org != "") {
			c.extra, c.ttlMs = leaseExtra(c.limit, replicas), ttl
			out = append(out, c)
		}
	}
	if capacity, refill, ok := burstOf(lim); ok {
		out = append(out, check{c: burst, k: k, limit: capacity, cost: 1,
			extra: leaseExtra(capacity, replicas), rate: refill})
	}
	return out
}

// burstOf is policy.Admitter's burst bucket of a bucket's limits: capacity
// Burst refilled at RPM/60 per second, or at Rate without an RPM; none
// when Burst is 0 or the refill is infinite.
func burstOf(l policy.Limits) (capacity int64, refill float64, ok bool) {
	refill = float64(l.RPM) / 60
	if l.RPM <= 0 {
		refill = l.Rate
	}
	return l.Burst, refill, l.Burst > 0 && !math.IsInf(refill, 1) && refill > 0
}
