package cluster

import (
	"math"
	"slices"
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

	backlog func(policy.Key) int // requests of a bucket queued on this replica; nil = 1

	mu sync.Mutex // guards held
	// held lists, per bucket, the slots the store handed to this replica
	// and not yet used, earliest first.
	held map[policy.Key][]time.Time
}

// maxBatch bounds the slots taken in one round trip: a replica's queued
// requests that leave before their slot waste at most this many.
const maxBatch = 8

// NewPacer returns a pacer reading each bucket's total rate from rates
// (its column and global factors included).
func NewPacer(st *Store, rates *policy.Pacer) *Pacer {
	fb := policy.NewPacer(policy.SharedRate(effectiveRates{rates}, st.opt.Replicas))
	p := &Pacer{st: st, rates: rates, fallback: fb, tolerance: policy.DefaultPacerTolerance,
		held: map[policy.Key][]time.Time{}}
	st.onTick(p.sweep)
	return p
}

// CountQueued tells the pacer how many requests of a bucket are queued on
// this replica (consume.Queue.Backlog), so that it takes up to that many
// slots (at most 8) in one round trip. Call it before the first release.
func (p *Pacer) CountQueued(backlog func(policy.Key) int) { p.backlog = backlog }

// effectiveRates reads a pacer's effective rates as base rates (for the
// fallback pacer, whose own factors stay neutral).
type effectiveRates struct{ p *policy.Pacer }

func (e effectiveRates) BaseRate(k policy.Key) (float64, bool) { return e.p.EffectiveRate(k), false }

// Wait is WaitAt now.
func (p *Pacer) Wait(k policy.Key, cost float64) time.Duration { return p.WaitAt(time.Now(), k, cost) }

// WaitAt implements consume.Pacer: how long after now k's next slot is.
// It asks the store for one when the replica holds none, and keeps it.
func (p *Pacer) WaitAt(now time.Time, k policy.Key, cost float64) time.Duration {
	rate, paced := p.rate(k)
	if !paced {
		return rate
	}
	if slot, ok := p.slot(k, now, p.stale(k)); ok {
		return max(slot.Sub(now), 0)
	}
	if !p.st.Up() {
		p.st.stats.fallbacks.Add(1)
		return p.fallback.WaitAt(now, k, cost)
	}
	wait, ok := p.reserve(k, cost, now)
	if !ok {
		return p.fallback.WaitAt(now, k, cost)
	}
	return wait
}

// AcquireOrSuspend is AcquireOrSuspendAt now.
func (p *Pacer) AcquireOrSuspend(k policy.Key, cost float64) time.Duration {
	return p.AcquireOrSuspendAt(time.Now(), k, cost)
}

// AcquireOrSuspendAt implements consume.Pacer: 0 when k's slot has come
// by now (the slot is used), else how long after now it is.
func (p *Pacer) AcquireOrSuspendAt(now time.Time, k policy.Key, cost float64) time.Duration {
	rate, paced := p.rate(k)
	if !paced {
		return rate
	}
	if slot, ok := p.slot(k, now, p.stale(k)); ok {
		if wait := slot.Sub(now); wait > 0 {
			return wait
		}
		p.release(k)
		return 0
	}
	if !p.st.Up() {
		p.st.stats.fallbacks.Add(1)
		return p.fallback.AcquireOrSuspendAt(now, k, cost)
	}
	if _, ok := p.reserve(k, cost, now); !ok {
		return p.fallback.AcquireOrSuspendAt(now, k, cost)
	}
	return p.AcquireOrSuspendAt(now, k, cost) // the slots are held now
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

// stale is how late a held slot may still be used: a slot used late is
// one release of the schedule, so the long-run rate stays exact; one
// older than this (a replica that waited for pool capacity) is dropped
// rather than released on top of the fresh ones.
func (p *Pacer) stale(k policy.Key) time.Duration {
	return max(p.rates.Interval(k), staleSlot)
}

// staleSlot is the least lateness after which a held slot is dropped.
const staleSlot = 250 * time.Millisecond

// slot returns k's earliest held slot, dropping stale ones.
func (p *Pacer) slot(k policy.Key, now time.Time, stale time.Duration) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.held[k]
	for len(q) > 0 && now.Sub(q[0]) >= stale {
		q = q[1:]
	}
	if len(q) == 0 {
		delete(p.held, k)
		return time.Time{}, false
	}
	p.held[k] = q
	return q[0], true
}

// push adds slots to k's held ones, keeping them in order.
func (p *Pacer) push(k policy.Key, slots ...time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := append(p.held[k], slots...)
	slices.SortFunc(q, func(a, b time.Time) int { return a.Compare(b) })
	p.held[k] = q
}

// release uses k's earliest slot.
func (p *Pacer) release(k policy.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.held[k]; len(q) > 1 {
		p.held[k] = q[1:]
	} else {
		delete(p.held, k)
	}
}

// intervalOf is k's pacing interval in µs at its total rate (0 when
// unpaced or paused).
func (p *Pacer) intervalOf(k policy.Key, cost float64) int64 {
	rate := p.rates.EffectiveRate(k)
	if math.IsInf(rate, 1) || !(rate > 0) {
		return 0
	}
	return max(int64(math.Ceil(cost/rate*1e6)), 1)
}

// paceTTL is how long a bucket's schedule outlives its next slot (ms).
func paceTTL(intervalUs int64) int64 {
	return intervalUs/1000 + int64(time.Minute/time.Millisecond)
}

// reserve asks the store for k's next slots, as many as requests of k
// are queued here (at most maxBatch), in one round trip, and holds them.
// It returns the wait until the first.
func (p *Pacer) reserve(k policy.Key, cost float64, now time.Time) (time.Duration, bool) {
	if !(cost > 0) {
		cost = 1
	}
	interval := p.intervalOf(k, cost)
	n := 1
	if p.backlog != nil {
		n = min(max(p.backlog(k), 1), maxBatch)
	}
	v, err := p.st.run(paceScript, []string{p.st.key("pace", k, "")}, 0, interval,
		p.tolerance.Microseconds(), n, paceTTL(interval))
	if err != nil {
		return 0, false
	}
	us, ok := v.(int64)
	if !ok {
		p.st.markDown(errBadReply)
		return 0, false
	}
	first := now.Add(time.Duration(us) * time.Microsecond) // before now when the grid kept a passed slot
	slots := make([]time.Time, n)
	for i := range slots {
		slots[i] = first.Add(time.Duration(int64(i)*interval) * time.Microsecond)
	}
	p.push(k, slots...)
	return max(first.Sub(now), 0), true
}

// sweep drops held slots nobody came back for (their requests left), so
// that held stays bounded by the buckets in use.
func (p *Pacer) sweep(now time.Time, _ bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, q := range p.held {
		if len(q) == 0 || now.Sub(q[len(q)-1]) > time.Minute {
			delete(p.held, k)
		}
	}
}
