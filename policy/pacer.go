package policy

import (
	"math"
	"sync/atomic"
	"time"
)

// RateSource supplies a bucket's base release rate (implemented by
// [Table]).
type RateSource interface {
	// BaseRate returns k's configured rate in requests/s (or tokens/s when
	// callers pass token costs; +Inf = unpaced) and whether k's tenant
	// has high priority.
	BaseRate(k Key) (perSec float64, high bool)
}

// VersionedRates is a RateSource whose answers change only with its
// version: while RateVersion returns the same value, BaseRate answers
// the same for every key. A Pacer keeps a key's base rate with its slot
// and asks the source again only when the version moved, so a release
// looks its tenant up in the tenant table once per change rather than
// once per request (implemented by [Table]). The pacer asks BaseRate,
// once per change, under a key's shard lock: it must not block.
type VersionedRates interface {
	RateSource
	RateVersion() uint64
}

// PacerOption configures a Pacer.
type PacerOption func(*Pacer)

// WithPacerIdle sets how long after its next slot an untouched key is
// forgotten (default [DefaultPacerIdle]). A forgotten key restarts from
// "now", exactly as it would after that much idleness anyway.
func WithPacerIdle(d time.Duration) PacerOption { return func(p *Pacer) { p.idle = int64(d) } }

// DefaultPacerIdle is the default idle horizon of a Pacer.
const DefaultPacerIdle = time.Minute

// WithPacerTolerance sets how late a release may come and still keep the
// bucket's slot grid (default [DefaultPacerTolerance]). Within it, a late
// release is made up by the next ones, so the long-run rate stays exact
// even when the consumer is woken a little late; beyond it (or beyond one
// interval, whichever is longer) the grid restarts from now, so an idle
// bucket earns no burst. The most a bucket can release back to back after
// being late is tolerance × rate (20 at 1,000 requests/s).
func WithPacerTolerance(d time.Duration) PacerOption {
	return func(p *Pacer) { p.tolerance = int64(d) }
}

// DefaultPacerTolerance is the default lateness a Pacer makes up: a few
// timer and scheduling delays, which at 1,000 requests/s are several
// intervals.
const DefaultPacerTolerance = 20 * time.Millisecond

// pausedWait is returned when the effective rate is zero (or NaN): the
// consumer comes back soon enough to notice the rate rising again.
const pausedWait = time.Second

// Pacer is the leaky bucket that releases each tenant+model at a constant
// rate: rate = base(tenant, model) × column factor(model) × global factor.
//
// Per key it keeps only the last release slot and that release's cost;
// the next slot is last + lastCost/rate, computed with the rate at the
// time of asking. So a rate change (base, column or global) applies at
// once to the pending slot, stretching or advancing it, without losing
// state or reordering anything. A consumer that comes back late by less
// than one interval keeps the slot grid (the long-run rate stays exact);
// later than that, the key restarts from now, so an idle key earns no
// burst.
//
// Pacer is safe for concurrent use; it never starts a goroutine. Idle
// keys are evicted by a few-entries-per-call sweep. Make it with
// [NewPacer].
type Pacer struct {
	src   RateSource
	ver   VersionedRates // src when it has versions, else nil
	epoch time.Time      // time line origin: slots are int64 ns since epoch
	idle  int64          // ns after its next slot that a key is forgotten
	// tolerance is the lateness (ns) that keeps the slot grid.
	tolerance int64
	global    atomic.Uint64
	columns   atomic.Pointer[map[string]float64] // copy on write; nil = all neutral
	keys      store[pacerState]
	changes   changeNotifier
}

type pacerState struct {
	last int64   // ns of the last release slot
	cost float64 // cost of that release
	next int64   // next slot at the rate of the last release: eviction hint
	base baseRate
}

// baseRate is a key's base rate as its source last answered, kept while
// the source's version stays (see [VersionedRates]). 16 bytes: a million
// keys' pacer holds a million of them.
type baseRate struct {
	perSec float64
	// version is the source's version when it answered, its low 32
	// bits. Two versions 2³² changes apart look the same: at a thousand
	// changes a second (each copies the tenant table) that is seven weeks.
	version uint32
	high    bool
}

// NewPacer returns a pacer reading base rates from src.
func NewPacer(src RateSource, opts ...PacerOption) *Pacer {
	p := &Pacer{src: src, epoch: time.Now(), idle: int64(DefaultPacerIdle), tolerance: int64(DefaultPacerTolerance)}
	for _, o := range opts {
		o(p)
	}
	p.ver, _ = src.(VersionedRates)
	p.global.Store(math.Float64bits(1))
	p.keys.init(numShards, p.idleKey)
	return p
}

// idleKey reports whether a key has been idle past its next slot for
// longer than the horizon, so forgetting it changes nothing.
func (p *Pacer) idleKey(s *pacerState, now int64) bool { return now-s.next > p.idle }

// AcquireOrSuspend returns 0 when k's next release slot has come (the
// slot is taken: release one request of the given cost now), or else how
// long until that slot (nothing taken: ask again then). Cost is 1 per
// request, or tokens when k's rate is in tokens/s; a non-positive or NaN
// cost counts as 1.
func (p *Pacer) AcquireOrSuspend(k Key, cost float64) time.Duration {
	return p.AcquireOrSuspendAt(time.Now(), k, cost)
}

// AcquireOrSuspendAt is AcquireOrSuspend at now: the decision itself, a
// pure function of now and the key's state. A caller that has read the
// clock already (the consumer reads it once per delivery) passes it.
func (p *Pacer) AcquireOrSuspendAt(now time.Time, k Key, cost float64) time.Duration {
	if !(cost > 0) {
		cost = 1
	}
	t, asked := int64(now.Sub(p.epoch)), p.askBase(k)
	sh, h := p.keys.lock(k)
	defer sh.mu.Unlock()
	s := sh.get(&p.keys, k, h, t)
	base := p.baseOf(k, s, asked)
	rate := p.effective(k.Model, base)
	switch {
	case math.IsInf(rate, 1):
		return 0 // unpaced
	case !(rate > 0):
		return pausedWait
	}
	if s == nil {
		s = sh.addSwept(&p.keys, k, h, t)
		*s = pacerState{last: t, cost: cost, next: t + interval(cost, rate), base: base}
		return 0
	}
	gap := interval(s.cost, rate)
	slot := s.last + gap
	if t < s.last { // the clock went back: measure from the last slot
		t = s.last
	}
	if t < slot {
		return time.Duration(slot - t)
	}
	if t-slot >= max(gap, p.tolerance) { // too late to keep the grid: an idle key earns no burst
		slot = t
	}
	*s = pacerState{last: slot, cost: cost, next: slot + interval(cost, rate), base: base}
	return 0
}

// Wait returns how long until k's next release slot, 0 when it has come,
// taking nothing: AcquireOrSuspend at the same instant would answer the
// same and take the slot.
func (p *Pacer) Wait(k Key, cost float64) time.Duration { return p.WaitAt(time.Now(), k, cost) }

// WaitAt is Wait at now.
func (p *Pacer) WaitAt(now time.Time, k Key, cost float64) time.Duration {
	t, asked := int64(now.Sub(p.epoch)), p.askBase(k)
	sh, h := p.keys.lock(k)
	defer sh.mu.Unlock()
	s := sh.get(&p.keys, k, h, t)
	rate := p.effective(k.Model, p.baseOf(k, s, asked))
	switch {
	case math.IsInf(rate, 1):
		return 0
	case !(rate > 0):
		return pausedWait
	case s == nil:
		return 0 // a fresh key releases at once
	}
	if slot := s.last + interval(s.cost, rate); t < slot {
		return time.Duration(slot - max(t, s.last))
	}
	return 0
}

// askBase is what a decision asks of k's base rate before it locks k's
// shard: a source without versions answers (it is asked every time, and
// never under the pacer's lock, as it may take locks of its own); a
// versioned one gives its version, to be compared with the one k's state
// was kept at (its BaseRate is asked under the lock, on a change only).
func (p *Pacer) askBase(k Key) baseRate {
	if p.ver == nil {
		r, high := p.src.BaseRate(k)
		return baseRate{perSec: r, high: high}
	}
	// The version is read before the rate (in baseOf): a change between
	// the two leaves a stale version with a fresh rate, never the reverse.
	return baseRate{version: uint32(p.ver.RateVersion())}
}

// baseOf returns k's base rate from what askBase asked: the source's
// answer, or the rate kept in s (k's state, nil when absent) while the
// source's version has not moved, or else the source's new answer, kept
// in s. requires k's shard locked
func (p *Pacer) baseOf(k Key, s *pacerState, asked baseRate) baseRate {
	if p.ver == nil {
		return asked
	}
	if s != nil && s.base.version == asked.version {
		return s.base
	}
	r, high := p.src.BaseRate(k) // a change; VersionedRates does not block
	b := baseRate{version: asked.version, perSec: r, high: high}
	if s != nil {
		s.base = b
	}
	return b
}

// Interval returns the time between two releases of k at its current
// effective rate: 0 when unpaced, pausedWait when paused.
func (p *Pacer) Interval(k Key) time.Duration {
	rate := p.EffectiveRate(k)
	switch {
	case math.IsInf(rate, 1):
		return 0
	case !(rate > 0):
		return pausedWait
	}
	return time.Duration(interval(1, rate))
}

// maxInterval caps one slot interval so slot arithmetic cannot overflow.
const maxInterval = int64(100 * 365 * 24 * time.Hour)

// interval returns cost/rate in ns, rounded up and capped.
func interval(cost, rate float64) int64 {
	return min(int64(durationOf(cost/rate)), maxInterval)
}

// EffectiveRate returns k's current rate: base × column × global. A
// high-priority tenant ignores a column factor below 1, so it keeps its
// pace when a model's column is tightened.
func (p *Pacer) EffectiveRate(k Key) float64 {
	base, high := p.src.BaseRate(k)
	return p.effective(k.Model, baseRate{perSec: base, high: high})
}

// effective is EffectiveRate from a base rate of model's.
func (p *Pacer) effective(model string, b baseRate) float64 {
	col := p.ColumnFactor(model)
	if b.high && col < 1 {
		col = 1
	}
	return b.perSec * col * p.GlobalFactor()
}

// SetColumnFactor scales the rate of every bucket of model by f (1 =
// neutral, +Inf = unpaced). It panics unless f > 0.
func (p *Pacer) SetColumnFactor(model string, f float64) {
	mustFactor(f)
	for {
		old := p.columns.Load()
		next := make(map[string]float64, mapLen(old)+1)
		if old != nil {
			for m, v := range *old {
				next[m] = v
			}
		}
		if f == 1 {
			delete(next, model)
		} else {
			next[model] = f
		}
		if p.columns.CompareAndSwap(old, &next) {
			p.changes.notify(Change{Model: model})
			return
		}
	}
}

func mapLen(m *map[string]float64) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// ColumnFactor returns model's column factor (1 unless set).
func (p *Pacer) ColumnFactor(model string) float64 {
	if m := p.columns.Load(); m != nil && len(*m) > 0 {
		if f, ok := (*m)[model]; ok {
			return f
		}
	}
	return 1
}

// SetGlobalFactor scales every bucket's rate by f (1 = neutral). It
// panics unless f > 0.
func (p *Pacer) SetGlobalFactor(f float64) {
	mustFactor(f)
	p.global.Store(math.Float64bits(f))
	p.changes.notify(Change{All: true})
}

// OnChange installs f to be called after each factor change (nil removes
// it). It is how queued requests learn of a speed-up: the app wakes the
// suspended buckets the change touches. f must not block for long.
func (p *Pacer) OnChange(f func(Change)) { p.changes.set(f) }

// GlobalFactor returns the global factor.
func (p *Pacer) GlobalFactor() float64 { return math.Float64frombits(p.global.Load()) }

// mustFactor panics on a factor that would stop or corrupt pacing: that
// is a bug in the caller (the control loop clamps to min_factor > 0).
func mustFactor(f float64) {
	if !(f > 0) {
		panic("policy: pacing factor must be > 0")
	}
}

// Len returns the number of keys currently held.
func (p *Pacer) Len() int { return p.keys.len() }
