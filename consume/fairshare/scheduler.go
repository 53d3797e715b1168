package fairshare

import (
	"math"
	"sync"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// NumBands is the number of priority bands; band 0 is served first.
const NumBands = 3

// DefaultHalfLife is how fast the recent service behind shares and Jain's
// index forgets: a bucket's service from one half-life ago counts half.
const DefaultHalfLife = 10 * time.Second

// Scheduler holds the wait sets and virtual counters of every model. It
// is safe for concurrent use; one mutex, mu, guards all of its state.
// Make it with [New].
type Scheduler struct {
	halfLife    float64       // seconds
	window      int64         // ns a bucket stays recent after its last request: see [DefaultActiveWindow]
	forgetAfter time.Duration // see [DefaultForgetAfter]

	mu     sync.Mutex
	models map[string]*model
	flows  map[policy.Key]*flow
	seq    uint64 // join order, the tie-break between equal counters
	clock  int64  // the latest time any call passed in, unix ns
	// idle holds the flows that only a counter above their band's floor
	// keeps, by when they were last seen: see sweep.
	idle []*flow
}

// model is one model's wait sets, one min-heap per band.
type model struct {
	heaps  [NumBands]flowHeap
	floor  [NumBands]float64 // counter of the last flow granted in each band
	grants [NumBands]uint64
	seen   [NumBands]int64 // unix ns a bucket of each band last joined or started
	// active is the sum of the weights of the model's active flows, those
	// that wait for or use its slots, and nActive their number: kept as
	// flows change, so that a share is O(1) with thousands of buckets.
	active  float64
	nActive int
	busy    int                // the sum of its flows' busy(): requests running or about to
	version uint64             // changes with any flow's service or wait: see competing
	members map[*flow]struct{} // the model's flows
	recent  recentSet
	s       *Scheduler
	comp    competingStat // see competing
}

// flow is one bucket as the scheduler sees it.
type flow struct {
	key     policy.Key
	m       *model // its model's state (models are never forgotten)
	band    int
	weight  float64
	counter float64 // weighted service: the ordering key
	seq     uint64
	hidx    int // index in its model's heap while waiting, else -1
	running int // requests granted and not yet done
	held    int // slots taken for it and not yet started: see Hold
	// heldCharge is what its holds were charged, given back as each is
	// used or returned; meanCost is the recent mean of what a request of
	// it is charged at its start, and meanCompletion of the completion
	// tokens a request of it generated (0: none yet). See Hold and
	// MeanCompletion.
	heldCharge     float64
	meanCost       float64
	meanCompletion float64
	// backlogged is true from a Join until [Scheduler.Idle]: the bucket
	// has had requests queued all along, so a Join in between (its next
	// request, after a grant) is not a return from idleness and is not
	// lifted.
	backlogged bool

	// counted: f is in its model's recent sums, with weight cw and busy
	// count cb; queued: it is in the model's expiry queue, last seen at
	// queuedAt; idleQueued: it is in the scheduler's idle queue, last
	// seen at idleAt. See recent.go.
	counted, queued, idleQueued bool
	cw                          float64
	cu                          usage
	queuedAt, idleAt            int64
	peak                        int // the most it ran at once while recent

	recent   float64 // weighted service, decayed with the half-life
	decayAt  int64   // unix ns of the last decay
	waitedAt int64   // unix ns when it last waited: it competed for the pool
	seenAt   int64   // unix ns of its last join, start or end: see recentAt
}

// New returns a Scheduler whose shares and fairness figure forget with
// halfLife (zero means DefaultHalfLife).
func New(halfLife time.Duration) *Scheduler {
	if halfLife <= 0 {
		halfLife = DefaultHalfLife
	}
	return &Scheduler{halfLife: halfLife.Seconds(), window: int64(DefaultActiveWindow), forgetAfter: DefaultForgetAfter,
		models: map[string]*model{}, flows: map[policy.Key]*flow{}}
}

func (s *Scheduler) model(name string) *model {
	m := s.models[name]
	if m == nil {
		m = &model{members: map[*flow]struct{}{}, s: s}
		s.models[name] = m
	}
	return m
}

func (s *Scheduler) flow(k policy.Key) *flow {
	f := s.flows[k]
	if f == nil {
		f = &flow{key: k, m: s.model(k.Model), band: 1, weight: 1, hidx: -1}
		s.flows[k] = f
		f.m.members[f] = struct{}{}
	}
	return f
}

// see records that f used or asked for the pool at now (unix ns).
// Requires mu held.
func (s *Scheduler) see(f *flow, now int64) {
	f.seenAt = max(f.seenAt, now)
	s.clock = max(s.clock, now)
}

// Join puts bucket k in its model's wait set, in band (0 = high) with
// weight (> 0; anything else counts as 1). A bucket already waiting stays
// where it is. A bucket that was idle (see [Scheduler.Idle]) is lifted to
// its band's virtual time, the counter of the last bucket granted a slot
// in the band: it gains nothing from having been idle, and it is served
// next unless another bucket is owed more.
// It reports whether k joined now (false: it was waiting already).
func (s *Scheduler) Join(k policy.Key, band int, weight float64, now time.Time) bool {
	band = min(max(band, 0), NumBands-1)
	if !(weight > 0) || math.IsInf(weight, 0) {
		weight = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flow(k)
	f.waitedAt = now.UnixNano()
	f.m.version++
	s.see(f, now.UnixNano())
	if f.hidx >= 0 {
		return false
	}
	m := f.m
	s.expire(m, now.UnixNano())
	s.sweep(now.UnixNano())
	m.seen[band] = now.UnixNano()
	m.leave(f)
	defer m.enter(f)
	f.band, f.weight = band, weight
	if !f.backlogged { // a return from idleness: lifted, banking nothing
		f.counter = max(f.counter, m.floor[band])
	}
	f.backlogged = true
	h := &m.heaps[band]
	s.seq++
	f.seq = s.seq
	h.push(f)
	return true
}

// Rejoin puts k back in its wait set, in the band and with the weight of
// its last Join, without a lift: it is still in the same busy period.
// It reports whether k was out of the set.
func (s *Scheduler) Rejoin(k policy.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[k]
	if f == nil || f.hidx >= 0 {
		return false
	}
	s.seq++
	f.seq = s.seq
	m := f.m
	m.leave(f)
	m.heaps[f.band].push(f)
	m.enter(f)
	return true
}

// Compete records that k wanted a slot at now and found none, without
// joining a wait set: how a caller that polls for capacity keeps the
// fairness figures ([ModelStat.Jain]) meaningful.
func (s *Scheduler) Compete(k policy.Key, weight float64, now time.Time) {
	if !(weight > 0) || math.IsInf(weight, 0) {
		weight = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flow(k)
	f.weight = weight
	f.waitedAt = now.UnixNano()
	f.m.version++
}

// Leave takes k out of its wait set (its request went away). The bucket
// stays backlogged until [Scheduler.Idle].
func (s *Scheduler) Leave(k policy.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[k]
	if f == nil || f.hidx < 0 {
		return
	}
	m := f.m
	m.leave(f)
	m.heaps[f.band].remove(f.hidx)
	m.enter(f)
	s.forget(f)
}

// Idle records that k has nothing queued any more: its next Join is a
// return from idleness and is lifted.
func (s *Scheduler) Idle(k policy.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.flows[k]; f != nil {
		f.backlogged = false
		s.forget(f)
	}
}

// Waits reports whether bucket k is in its model's wait set.
func (s *Scheduler) Waits(k policy.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[k]
	return f != nil && f.hidx >= 0
}

// Waiting reports whether any bucket of model waits for a slot.
func (s *Scheduler) Waiting(model string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.models[model]
	if m == nil {
		return false
	}
	for b := range m.heaps {
		if len(m.heaps[b]) > 0 {
			return true
		}
	}
	return false
}

// Best returns the bucket that the next slot for one of models should go
// to: the highest band with a waiting bucket, then the lowest counter,
// then the earliest join. It takes nothing; see [Scheduler.Grant].
func (s *Scheduler) Best(models []string) (policy.Key, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.best(models)
	if f == nil {
		return policy.Key{}, false
	}
	return f.key, true
}

// best requires mu held.
func (s *Scheduler) best(models []string) *flow {
	for b := range NumBands {
		var top *flow
		for _, name := range models {
			m := s.models[name]
			if m == nil || len(m.heaps[b]) == 0 {
				continue
			}
			if f := m.heaps[b][0]; top == nil || f.before(top) {
				top = f
			}
		}
		if top != nil {
			return top
		}
	}
	return nil
}

// Grant takes k out of its wait set because a slot was given to it. It
// reports false if k was not waiting.
func (s *Scheduler) Grant(k policy.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[k]
	if f == nil || f.hidx < 0 {
		return false
	}
	s.grant(f)
	return true
}

// GrantHold is Grant and then Hold, under one lock: how a gate hands a
// waiting bucket the slot it took for it.
func (s *Scheduler) GrantHold(k policy.Key, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[k]
	if f == nil || f.hidx < 0 {
		return false
	}
	m := f.m
	m.leave(f)
	m.take(f)
	f.held++
	m.enter(f)
	s.chargeHold(f, now)
	return true
}

// grant requires mu held and f waiting.
func (s *Scheduler) grant(f *flow) {
	m := f.m
	m.leave(f)
	m.take(f)
	m.enter(f)
}

// take removes f from its wait set for a grant. Requires mu held, f
// waiting and out of m's sums (leave).
func (m *model) take(f *flow) {
	m.heaps[f.band].remove(f.hidx)
	m.floor[f.band] = max(m.floor[f.band], f.counter)
	m.grants[f.band]++
}

// Hold records that a slot was taken for k that its next Start will use:
// between the two, k counts as running it, so that two deliveries of k a
// moment apart do not both find k owed a slot (see [Scheduler.Access]).
// It charges k what a request of k has recently been charged at its
// start: a bucket granted several slots at once pays for each as it is
// granted, not only when its requests start. Start and Unhold give it
// back.
func (s *Scheduler) Hold(k policy.Key, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold(s.flow(k), now)
}

// hold requires mu held.
func (s *Scheduler) hold(f *flow, now time.Time) {
	m := f.m
	m.leave(f)
	f.held++
	m.enter(f)
	s.chargeHold(f, now)
}

// chargeHold charges f for the hold it just took. Requires mu held.
func (s *Scheduler) chargeHold(f *flow, now time.Time) {
	f.heldCharge += f.meanCost
	s.charge(f, f.meanCost, now)
}

// unhold gives back one hold of f and what it was charged. Requires mu
// held, and f.held > 0.
func (s *Scheduler) unhold(f *flow, now time.Time) {
	m := f.m
	m.leave(f)
	back := f.dropHold()
	m.enter(f)
	s.charge(f, -back, now)
}

// dropHold takes one hold off f and returns what it was charged, for the
// caller to give back. Requires mu held, f.held > 0, and f out of its
// model's sums (model.leave).
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.flows[k]; f != nil && f.held > 0 {
		s.unhold(f, now)
		s.forget(f)
	}
}

// meanWeight is how much a new request counts in a bucket's recent means.
const meanWeight = 0.2

// Start records that one request of k began on the pool, charging cost,
// the service it is expected to take; it uses up a Hold of k, if any,
// giving back what the hold was charged.
func (s *Scheduler) Start(k policy.Key, cost float64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flow(k)
	m := f.m
	m.leave(f)
	var back float64
	if f.held > 0 {
		back = f.dropHold()
	}
	f.running++
	m.enter(f)
	s.charge(f, -back, now)
	m.seen[f.band] = now.UnixNano()
	s.see(f, now.UnixNano())
	f.meanCost = ewma(f.meanCost, cost)
	s.charge(f, cost, now)
	s.fix(f)
}

// Completed records that a request of k generated tokens completion
// tokens, for [Scheduler.MeanCompletion].
func (s *Scheduler) Completed(k policy.Key, tokens float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.flows[k]; f != nil && tokens >= 0 {
		f.meanCompletion = ewma(f.meanCompletion, tokens)
	}
}

// MeanCompletion is the recent mean of the completion tokens k's
// requests generated; false when none of its requests ended since it was
// last forgotten.
func (s *Scheduler) MeanCompletion(k policy.Key) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flows[k]
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.flows[k]; f != nil {
		s.charge(f, tokens, now)
	}
}

// charge requires mu held.
func (s *Scheduler) charge(f *flow, tokens float64, now time.Time) {
	if tokens == 0 || math.IsNaN(tokens) {
		return
	}
	v := tokens / f.weight
	f.m.version++
	f.counter = max(f.counter+v, 0)
	f.decay(now.UnixNano(), s.halfLife)
	f.recent = max(f.recent+v, 0)
	s.fix(f)
}

// Done records that one request of k left the pool at now.
func (s *Scheduler) Done(k policy.Key, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.flows[k]; f != nil {
		m := f.m
		m.leave(f)
		f.running = max(f.running-1, 0)
		s.see(f, now.UnixNano()) // before enter: recent from now
		m.enter(f)
		s.fix(f)
		s.forget(f)
		s.expire(m, now.UnixNano())
	}
}

// fix restores f's place in its wait set after its key changed. Requires
// mu held.
func (s *Scheduler) fix(f *flow) {
	if f.hidx >= 0 {
		f.m.heaps[f.band].fix(f.hidx)
	}
}

// forget drops a flow that holds nothing the scheduler needs: not
// waiting, nothing running or queued, not recent (see
// [Scheduler.Access]), and a counter no higher than its band's floor, to
// which it would be lifted on return anyway. A flow with a higher counter
// goes in the idle queue and is dropped DefaultForgetAfter after it was
// last seen (sweep); a recent one is uncounted, and then forgotten, when
// its window passes (expire). Requires mu held.
func (s *Scheduler) forget(f *flow) {
	if !s.forgettable(f) {
		return
	}
	if f.counter <= f.m.floor[f.band] {
		s.drop(f)
		return
	}
	if !f.idleQueued {
		f.idleQueued, f.idleAt = true, f.seenAt
		s.idle = append(s.idle, f)
	}
}

// leave takes f out of m's active sums before a change to it; enter puts
// it back after the change if it is active then, and recounts it in the
// recent sums (which nothing reads between the two). Requires mu held.
func (m *model) leave(f *flow) {
	if !f.active() {
		return
	}
	m.nActive--
	m.active -= f.weight
	m.busy -= f.busy()
	if m.nActive == 0 {
		m.active = 0 // no float residue once nothing is active
	}
}

func (m *model) enter(f *flow) {
	if f.active() {
		m.nActive++
		m.active += f.weight
		m.busy += f.busy()
	}
	m.s.recount(m, f)
}

// active reports whether f waits for or uses its model's slots.
func (f *flow) active() bool { return f.hidx >= 0 || f.running > 0 || f.held > 0 }

// busy is what f runs or is about to run.
func (f *flow) busy() int { return f.running + f.held }

// decay brings recent to now.
func (f *flow) decay(now int64, halfLife float64) {
	if f.decayAt != 0 && now > f.decayAt {
		f.recent *= math.Exp2(-float64(now-f.decayAt) / 1e9 / halfLife)
	}
	f.decayAt = max(f.decayAt, now)
}

// before orders flows within a band: the lowest counter, then the one
// with fewer requests running (a bucket lifted to the others' counter on
// its return is not made to wait behind one that holds many slots), then
// the earliest join.
func (f *flow) before(g *flow) bool {
	if f.counter != g.counter {
		return f.counter < g.counter
	}
	if f.running != g.running {
		return f.running < g.running
	}
	return f.seq < g.seq
}
