package cluster

import (
	"math"
	"sync"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// pausedWait is how soon a paused bucket (rate 0) asks again, as in
// policy.Pacer.
const pausedWait = time.Second

// Pacer releases each bucket at its configured rate in total across the
// replicas: the release slots come from a shared schedule in the store
// (one round trip per release), whichever replica asks. A replica keeps
// the slot it was handed until that instant, so the consumer's
// Wait-then-AcquireOrSuspend costs one round trip, not two. A slot not
// used within max(interval, tolerance) of its time is dropped and a new
// one asked for, so a replica that waited for pool capacity does not
// release a stale slot on top of the others' fresh ones.
//
// While the store is unreachable each replica paces at rate/N (the
// fallback pacer). Pacer implements consume.Pacer; it is safe for
// concurrent use. Make it with [NewPacer].
type Pacer struct {
	st        *Store
	rates     *policy.Pacer // the bucket's rate in total, with the control loop's factors
	fallback  *policy.Pacer // rate/N
	tolerance time.Duration

	mu   sync.Mutex               // guards held
	held map[policy.Key]time.Time // a slot handed out by the store, not yet used
}

// NewPacer returns a pacer reading each bucket's total rate from rates
// (its column and global factors included).
func NewPacer(st *Store, rates *policy.Pacer) *Pacer {
	fb := policy.NewPacer(policy.SharedRate(effectiveRates{rates}, st.opt.Replicas))
	p := &Pacer{st: st, rates: rates, fallback: fb, tolerance: policy.DefaultPacerTolerance,
		held: map[policy.Key]time.Time{}}
	st.onTick(p.sweep)
	return p
}

// effectiveRates reads a pacer's effective rates as base rates (for the
// fallback pacer, whose own factors stay neutral).
type effectiveRates struct{ p *policy.Pacer }

func (e effectiveRates) BaseRate(k policy.Key) (float64, bool) { return e.p.EffectiveRate(k), false }

// Wait implements consume.Pacer: how long until k's next slot. It asks
// the store for one when the replica holds none, and keeps it.
func (p *Pacer) Wait(k policy.Key, cost float64) time.Duration {
	rate, paced := p.rate(k)
	if !paced {
		return rate
	}
	now := time.Now()
	if slot, ok := p.slot(k, now, p.stale(k)); ok {
		return max(slot.Sub(now), 0)
	}
	if !p.st.Up() {
		p.st.stats.fallbacks.Add(1)
		return p.fallback.Wait(k, cost)
	}
	wait, ok := p.reserve(k, cost, now)
	if !ok {
		return p.fallback.Wait(k, cost)
	}
	p.hold(k, now.Add(wait))
	return wait
}

// AcquireOrSuspend implements consume.Pacer: 0 when k's slot has come
// (the slot is used), else how long until it.
func (p *Pacer) AcquireOrSuspend(k policy.Key, cost float64) time.Duration {
	rate, paced := p.rate(k)
	if !paced {
		return rate
	}
	now := time.Now()
	if slot, ok := p.slot(k, now, p.stale(k)); ok {
		if wait := slot.Sub(now); wait > 0 {
			return wait
		}
		p.release(k)
		return 0
	}
	if !p.st.Up() {
		p.st.stats.fallbacks.Add(1)
		return p.fallback.AcquireOrSuspend(k, cost)
	}
	wait, ok := p.reserve(k, cost, now)
	if !ok {
		return p.fallback.AcquireOrSuspend(k, cost)
	}
	if wait > 0 {
		p.hold(k, now.Add(wait))
	}
	return wait
}

// Interval implements consume.Pacer: the time between two releases of k
// at its total rate.
func (p *Pacer) Interval(k policy.Key) time.Duration { return p.rates.Interval(k) }

// rate returns (0, false) for an unpaced bucket, (pausedWait, false) for
// a paused one, and (0, true) for a paced one.
func (p *Pacer) rate(k policy.Key) (time.Duration, bool) {
	r := p.rates.EffectiveRate(k)
	switch {
	case math.IsInf(r, 1):
		return 0, false
	case !(r > 0):
		return pausedWait, false
	}
	return 0, true
}

// stale is how late a held slot may be used.
func (p *Pacer) stale(k policy.Key) time.Duration {
	return max(p.rates.Interval(k), p.tolerance)
}

// slot returns k's held slot unless it is stale (then it is dropped).
func (p *Pacer) slot(k policy.Key, now time.Time, stale time.Duration) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.held[k]
	if ok && now.Sub(s) >= stale {
		delete(p.held, k)
		return time.Time{}, false
	}
	return s, ok
}

func (p *Pacer) hold(k policy.Key, slot time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held[k] = slot
}

func (p *Pacer) release(k policy.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, k)
}

// reserve asks the store for k's next slot: one round trip.
func (p *Pacer) reserve(k policy.Key, cost float64, now time.Time) (time.Duration, bool) {
	if !(cost > 0) {
		cost = 1
	}
	rate := p.rates.EffectiveRate(k)
	interval := max(int64(math.Ceil(cost/rate*1e6)), 1) // µs
	ttl := interval/1000 + int64(time.Minute/time.Millisecond)
	v, err := p.st.run(paceScript, []string{p.st.key("pace", k, "")}, 0, interval, p.tolerance.Microseconds(), ttl)
	if err != nil {
		return 0, false
	}
	us, ok := v.(int64)
	if !ok {
		p.st.markDown(errBadReply)
		return 0, false
	}
	return time.Duration(us) * time.Microsecond, true
}

// sweep drops held slots nobody came back for (their requests left), so
// that held stays bounded by the buckets in use.
func (p *Pacer) sweep(now time.Time, _ bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.held {
		if now.Sub(s) > time.Minute {
			delete(p.held, k)
		}
	}
}
