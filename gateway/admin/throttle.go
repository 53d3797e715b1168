package admin

import (
	"net/netip"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Defaults of the wrong-token limiter (admin.auth_burst, auth_refill and
// auth_max_sources).
const (
	DefaultAuthBurst      = 5
	DefaultAuthRefill     = 10 * time.Second
	DefaultAuthMaxSources = 10000
)

// overflowKey is the one budget shared by the sources met while the
// table is full. No source has it: a source's key is its prefix, with no
// model.
var overflowKey = policy.Key{Model: "overflow"}

// authLimiter slows down wrong admin tokens per source address with
// policy's token bucket: each source may present burst tokens at once and
// earns one more try per refill. A try is taken before the token is
// checked and given back when the token was right, so an operator's own
// requests cost nothing and concurrent wrong tokens cannot overdraw the
// budget. A source with no try left is told how long to wait, the token
// unchecked.
//
// It remembers about max sources (concurrent new sources may pass it by
// a few): once it holds max, it first drops idle ones (budget full again:
// the same as absent), and when none is idle a new source shares one
// overflow budget with every other source met while the table is full;
// a source that is being slowed down keeps its own budget. IPv6 sources
// are keyed by their /64, which one host usually owns whole.
//
// It starts no goroutine. It is safe for concurrent use.
type authLimiter struct {
	tries *policy.TokenBucket
	p     policy.BucketParams
	max   int
}

func newAuthLimiter(burst int, refill time.Duration, max int) *authLimiter {
	if burst <= 0 {
		burst = DefaultAuthBurst
	}
	if refill <= 0 {
		refill = DefaultAuthRefill
	}
	if max <= 0 {
		max = DefaultAuthMaxSources
	}
	p := policy.BucketParams{Capacity: float64(burst), Refill: float64(time.Second) / float64(refill)}
	return &authLimiter{tries: policy.NewTokenBucket(p), p: p, max: max}
}

// reserve takes one try from src's budget at now. It returns the key to
// refund when the token proves right, or, when src has no try left, how
// long until it has one (the key is then not to be refunded).
func (l *authLimiter) reserve(now time.Time, src netip.Prefix) (policy.Key, time.Duration) {
	k := l.key(now, src)
	d, _ := l.tries.TakeAt(now, k, 1, l.p) // cannot fail: the cost is 1
	if !d.Allowed {
		return k, d.RetryAfter
	}
	return k, 0
}

// refund gives back the try reserve took: the token was right.
func (l *authLimiter) refund(now time.Time, k policy.Key) { l.tries.RefundAt(now, k, 1) }

// key is src's key, or the overflow's when the table is full of busy
// sources and src is not one of them.
func (l *authLimiter) key(now time.Time, src netip.Prefix) policy.Key {
	k := policy.Key{Tenant: src.String()}
	if l.tries.Len() < l.max || l.busy(now, k) {
		return k
	}
	l.tries.Sweep(now)
	if l.tries.Len() < l.max {
		return k
	}
	return overflowKey
}

// busy reports whether k's budget is short of full: k has an entry of its
// own that no sweep may drop.
func (l *authLimiter) busy(now time.Time, k policy.Key) bool {
	return l.tries.WaitAt(now, k, l.p.Capacity, l.p) > 0
}

// sourceOf keys a request's remote address: the address itself, or its
// /64 for IPv6. The admin listener is reached directly, so RemoteAddr is
// the peer; X-Forwarded-For is not trusted. An address that does not
// parse keys as the zero prefix, one shared budget.
func sourceOf(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits) // cannot fail: bits fits the address
	return p
}
