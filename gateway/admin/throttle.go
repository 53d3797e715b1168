package admin

import (
	"net/netip"
	"sync"
	"time"
)

// Defaults of the wrong-token limiter (admin.auth_burst, auth_refill and
// auth_max_sources).
const (
	DefaultAuthBurst      = 5
	DefaultAuthRefill     = 10 * time.Second
	DefaultAuthMaxSources = 10000
)

// evictScan bounds the entries one insertion into a full table looks at
// for an idle one to evict, so that a table full of busy sources costs a
// request a bounded scan.
const evictScan = 64

// authLimiter slows down wrong admin tokens per source address. Each
// source may present burst tokens at once, and earns one more try per
// refill (a GCRA: its state is the time at which its budget is full
// again). A try is reserved before the token is checked and given back
// when the token was right, so an operator's own requests cost nothing
// and concurrent wrong tokens cannot overdraw the budget. A source with
// no try left is told how long to wait, the token unchecked.
//
// It remembers at most max sources: inserting into a full table evicts
// idle entries (budget full again: the same as absent); when none of the
// entries scanned is idle, the new source shares one overflow budget
// with every other source met while the table is full. IPv6 sources are
// keyed by their /64, which one host usually owns whole.
//
// It starts no goroutine. It is safe for concurrent use.
type authLimiter struct {
	burst  int
	refill time.Duration

	mu       sync.Mutex // guards sources and overflow
	max      int
	sources  map[netip.Prefix]*authBudget
	overflow authBudget
}

// authBudget is one source's state: full is when its budget is whole
// again (the zero time: whole).
type authBudget struct{ full time.Time }

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
	return &authLimiter{burst: burst, refill: refill, max: max, sources: make(map[netip.Prefix]*authBudget)}
}

// reserveAt takes one try from src's budget at now. It returns the
// budget to refund when the token proves right, or, when src has no try
// left, nil and how long until it has one.
func (l *authLimiter) reserveAt(now time.Time, src netip.Prefix) (*authBudget, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.budget(now, src)
	start := b.full
	if start.Before(now) {
		start = now
	}
	next := start.Add(l.refill)
	if wait := next.Sub(now) - time.Duration(l.burst)*l.refill; wait > 0 {
		return nil, wait
	}
	b.full = next
	return b, 0
}

// refund gives back the try reserveAt took: the token was right.
func (l *authLimiter) refund(b *authBudget) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b.full = b.full.Add(-l.refill)
}

// budget finds or makes src's budget. Requires l.mu held.
func (l *authLimiter) budget(now time.Time, src netip.Prefix) *authBudget {
	if b, ok := l.sources[src]; ok {
		return b
	}
	if len(l.sources) >= l.max {
		l.evictIdle(now)
	}
	if len(l.sources) >= l.max {
		return &l.overflow
	}
	b := &authBudget{}
	l.sources[src] = b
	return b
}

// evictIdle deletes idle entries among the first evictScan of the map's
// (random) iteration order. Requires l.mu held.
func (l *authLimiter) evictIdle(now time.Time) {
	n := 0
	for k, b := range l.sources {
		if !b.full.After(now) {
			delete(l.sources, k)
		}
		if n++; n == evictScan {
			return
		}
	}
}

// len reports the sources remembered.
func (l *authLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sources)
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
