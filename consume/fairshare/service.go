package fairshare

import (
	"math"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Hold records that a slot was taken for k that its next Start will use:
// between the two, k counts as running it, so that two deliveries of k a
// moment apart do not both find k owed a slot (see [Scheduler.Access]).
// It charges k what a request of k has recently been charged at its
// start: a bucket granted several slots at once pays for each as it is
// granted, not only when its requests start. Start and Unhold give it
// back. band and weight are k's, as [Scheduler.Join] takes them: a bucket
// that takes a free slot without waiting is known by its band too (see
// [Scheduler.ActiveAbove]); a bucket in the wait set keeps those it
// joined with.
func (s *Scheduler) Hold(k policy.Key, band int, weight float64, now time.Time) {
	m := s.lock(k.Model)
	defer m.mu.Unlock()
	f := m.flow(k)
	m.leave(f)
	if f.hidx < 0 {
		f.band, f.weight = min(max(band, 0), NumBands-1), validWeight(weight)
	}
	f.held++
	m.enter(f)
	m.chargeHold(f, now)
}

// chargeHold charges f for the hold it just took. Requires m.mu held.
func (m *model) chargeHold(f *flow, now time.Time) {
	f.heldCharge += f.meanCost
	m.charge(f, f.meanCost, now)
}

// dropHold takes one hold off f and returns what it was charged, for the
// caller to give back. Requires its model's lock held, f.held > 0, and f
// out of its model's sums (model.leave).
func (f *flow) dropHold() float64 {
	back := f.heldCharge / float64(f.held)
	f.held--
	f.heldCharge -= back
	if f.held == 0 {
		f.heldCharge = 0 // no float residue
	}
	return back
}

// Unhold gives back a Hold whose slot was released without a Start.
func (s *Scheduler) Unhold(k policy.Key, now time.Time) {
	m := s.lockIf(k.Model)
	if m == nil {
		return
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	if f == nil || f.held == 0 {
		return
	}
	m.leave(f)
	back := f.dropHold()
	m.enter(f)
	m.charge(f, -back, now)
	m.forget(f)
}

// meanWeight is how much a new request counts in a bucket's recent means.
const meanWeight = 0.2

// Start records that one request of k began on the pool, charging cost,
// the service it is expected to take; it uses up a Hold of k, if any,
// giving back what the hold was charged.
func (s *Scheduler) Start(k policy.Key, cost float64, now time.Time) {
	s.StartCosting(k, false, func(float64, bool) float64 { return cost }, now)
}

// StartCosting is Start with the cost worked out by cost from k's recent
// mean of completion tokens, as MeanCompletion reports it, under the
// model's lock: the one lock a request's start takes. cost must not
// call the Scheduler. It returns the cost charged. emptied says that
// k's queue emptied as this request left it: Idle, under the same lock,
// unless k has joined its wait set again since (a request of it came
// meanwhile, and waits).
func (s *Scheduler) StartCosting(k policy.Key, emptied bool, cost func(meanCompletion float64, ok bool) float64, now time.Time) float64 {
	m := s.lock(k.Model)
	defer m.mu.Unlock()
	f := m.flow(k)
	if emptied && f.hidx < 0 {
		f.backlogged = false
	}
	charged := cost(f.meanCompletion, f.meanCompletion != 0)
	m.leave(f)
	var back float64
	if f.held > 0 {
		back = f.dropHold()
	}
	f.running++
	m.enter(f)
	m.charge(f, -back, now)
	m.seen[f.band] = now.UnixNano()
	m.see(f, now.UnixNano())
	f.meanCost = ewma(f.meanCost, charged)
	m.charge(f, charged, now)
	m.fix(f)
	return charged
}

// Completed records that a request of k generated tokens completion
// tokens, for [Scheduler.MeanCompletion].
func (s *Scheduler) Completed(k policy.Key, tokens float64) {
	m := s.lockIf(k.Model)
	if m == nil {
		return
	}
	defer m.mu.Unlock()
	if f := m.flows[k]; f != nil && tokens >= 0 {
		f.meanCompletion = ewma(f.meanCompletion, tokens)
	}
}

// MeanCompletion is the recent mean of the completion tokens k's
// requests generated; false when none of its requests ended since it was
// last forgotten.
func (s *Scheduler) MeanCompletion(k policy.Key) (float64, bool) {
	m := s.lockIf(k.Model)
	if m == nil {
		return 0, false
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	if f == nil || f.meanCompletion == 0 {
		return 0, false
	}
	return f.meanCompletion, true
}

// ewma moves mean towards x; a zero mean is none yet and takes x.
func ewma(mean, x float64) float64 {
	if mean == 0 {
		return x
	}
	return mean + meanWeight*(x-mean)
}

// Charge adds tokens (already weighted by the completion weight where
// they are completion tokens; may be negative to correct an estimate) to
// k's service.
func (s *Scheduler) Charge(k policy.Key, tokens float64, now time.Time) {
	m := s.lockIf(k.Model)
	if m == nil {
		return
	}
	defer m.mu.Unlock()
	if f := m.flows[k]; f != nil {
		m.charge(f, tokens, now)
	}
}

// charge requires m.mu held.
func (m *model) charge(f *flow, tokens float64, now time.Time) {
	if tokens == 0 || math.IsNaN(tokens) {
		return
	}
	v := tokens / f.weight
	f.counter = max(f.counter+v, 0)
	f.decay(now.UnixNano(), m.s.halfLife)
	old := f.recent
	f.recent = max(f.recent+v, 0)
	m.recharged(f, old, now.UnixNano())
	m.fix(f)
}

// Done records that one request of k left the pool at now.
func (s *Scheduler) Done(k policy.Key, now time.Time) {
	m := s.lockIf(k.Model)
	if m == nil {
		return
	}
	defer m.mu.Unlock()
	if f := m.flows[k]; f != nil {
		m.leave(f)
		f.running = max(f.running-1, 0)
		m.ended[f.band] = now.UnixNano()
		m.see(f, now.UnixNano()) // before enter: recent from now
		m.enter(f)
		m.fix(f)
		m.forget(f)
		m.expire(now.UnixNano())
	}
}

// fix restores f's place in its wait set after its key changed. Requires
// m.mu held.
func (m *model) fix(f *flow) {
	if f.hidx >= 0 {
		m.heaps[f.band].fix(f.hidx)
	}
}

// forget drops a flow that holds nothing the scheduler needs: not
// waiting, nothing running or queued, not recent (see
// [Scheduler.Access]), and a counter no higher than its band's floor, to
// which it would be lifted on return anyway. A flow with a higher counter
// goes in the idle queue and is dropped DefaultForgetAfter after it was
// last seen (sweep); a recent one is uncounted, and then forgotten, when
// its window passes (expire). Requires m.mu held.
func (m *model) forget(f *flow) {
	if !m.forgettable(f) {
		return
	}
	if f.counter <= m.floor[f.band] {
		m.drop(f)
		return
	}
	if !f.idleQueued {
		f.idleQueued, f.idleAt = true, f.seenAt
		m.idle = append(m.idle, f)
	}
}
