package fairshare

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// NumBands is the number of priority bands; band 0 is served first.
const NumBands = 3

// DefaultHalfLife is how fast the recent service behind shares and Jain's
// index forgets: a bucket's service from one half-life ago counts half.
const DefaultHalfLife = 10 * time.Second

// Scheduler holds the wait sets and virtual counters of every model. It
// is safe for concurrent use. Each model has its own lock, which guards
// the model's state and its flows: one model's grants never wait on
// another's. A call about one bucket takes its model's lock; a call
// about several models ([Scheduler.Best]) takes theirs one at a time.
// Make it with [New].
type Scheduler struct {
	halfLife    float64       // seconds
	window      int64         // ns a bucket stays recent after its last request: see [DefaultActiveWindow]
	forgetAfter time.Duration // see [DefaultForgetAfter]
	seq         atomic.Uint64 // join order, the tie-break between equal counters, across models

	// models holds each model's state by name (string → *model): a
	// model, once made, is kept. A sync.Map, so that finding a model
	// writes nothing shared between the cores.
	models sync.Map
}

// model is one model's wait sets, one min-heap per band, and its flows.
// mu guards every field below it and every field of its flows.
type model struct {
	s  *Scheduler
	mu sync.Mutex

	flows map[policy.Key]*flow
	clock int64 // the latest time any call about the model passed in, unix ns
	// idle holds the flows that only a counter above their band's floor
	// keeps, by when they were last seen: see sweep.
	idle   []*flow
	heaps  [NumBands]flowHeap
	floor  [NumBands]float64 // counter of the last flow granted in each band
	grants [NumBands]uint64
	seen   [NumBands]int64 // unix ns a bucket of each band last joined or started
	ended  [NumBands]int64 // unix ns a request of each band last ended
	// bandBusy is the sum of busy() over each band's flows.
	bandBusy [NumBands]int
	// active is the sum of the weights of the model's active flows, those
	// that wait for or use its slots, and nActive their number: kept as
	// flows change, so that a share is O(1) with thousands of buckets.
	active  float64
	nActive int
	busy    int // the sum of its flows' busy(): requests running or about to
	// waiting is how many flows are in heaps: written under mu, read
	// without it by Waiting, which every delivery and every end asks.
	waiting atomic.Int32
	recent  recentSet
	comp    competingSums
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

	// counted: f is in its model's recent sums, with weight cw, usage cu
	// and band cband; queued: it is in the model's expiry queue, last seen at
	// queuedAt; idleQueued: it is in the scheduler's idle queue, last
	// seen at idleAt. See recent.go.
	counted, queued, idleQueued bool
	cw                          float64
	cu                          usage
	cband                       int
	queuedAt, idleAt            int64
	peak                        int // the most it ran at once while recent

	recent   float64 // weighted service, decayed with the half-life
	decayAt  int64   // unix ns of the last decay
	waitedAt int64   // unix ns when it last waited: it competed for the pool
	// competes: f is in its model's competingSums, in their list
	// between cprev and cnext.
	competes     bool
	cprev, cnext *flow
	seenAt       int64 // unix ns of its last join, start or end: see recentAt
}

// New returns a Scheduler whose shares and fairness figure forget with
// halfLife (zero means DefaultHalfLife).
func New(halfLife time.Duration) *Scheduler {
	if halfLife <= 0 {
		halfLife = DefaultHalfLife
	}
	return &Scheduler{halfLife: halfLife.Seconds(), window: int64(DefaultActiveWindow), forgetAfter: DefaultForgetAfter}
}

// lock returns model name's state with its lock held, made if need be;
// the caller unlocks it.
func (s *Scheduler) lock(name string) *model {
	v, ok := s.models.Load(name)
	if !ok {
		v, _ = s.models.LoadOrStore(name, &model{s: s, flows: map[policy.Key]*flow{}})
	}
	m := v.(*model)
	m.mu.Lock()
	return m
}

// lockIf is lock for a model the scheduler has seen; nil (and nothing
// locked) for one it has not.
func (s *Scheduler) lockIf(name string) *model {
	v, ok := s.models.Load(name)
	if !ok {
		return nil
	}
	m := v.(*model)
	m.mu.Lock()
	return m
}

// flow returns k's flow, made if need be. Requires m.mu held.
func (m *model) flow(k policy.Key) *flow {
	f := m.flows[k]
	if f == nil {
		f = &flow{key: k, m: m, band: 1, weight: 1, hidx: -1}
		m.flows[k] = f
	}
	return f
}

// see records that f used or asked for the pool at now (unix ns).
// Requires m.mu held.
func (m *model) see(f *flow, now int64) {
	f.seenAt = max(f.seenAt, now)
	m.clock = max(m.clock, now)
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
	weight = validWeight(weight)
	m := s.lock(k.Model)
	defer m.mu.Unlock()
	t := now.UnixNano()
	f := m.flow(k)
	f.waitedAt = t
	m.waited(f)
	m.see(f, t)
	if f.hidx >= 0 {
		return false
	}
	m.expire(t)
	m.sweep(t)
	m.seen[band] = t
	m.leave(f)
	defer m.enter(f)
	f.band, f.weight = band, weight
	if !f.backlogged { // a return from idleness: lifted, banking nothing
		f.counter = max(f.counter, m.floor[band])
	}
	f.backlogged = true
	f.seq = s.seq.Add(1)
	m.enqueue(f, band)
	return true
}

// validWeight is weight, or 1 for anything not a positive finite number.
func validWeight(weight float64) float64 {
	if !(weight > 0) || math.IsInf(weight, 0) {
		return 1
	}
	return weight
}

// Rejoin puts k back in its wait set, in the band and with the weight of
// its last Join, without a lift: it is still in the same busy period.
// It reports whether k was out of the set.
func (s *Scheduler) Rejoin(k policy.Key) bool {
	m := s.lockIf(k.Model)
	if m == nil {
		return false
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	if f == nil || f.hidx >= 0 {
		return false
	}
	f.seq = s.seq.Add(1)
	m.leave(f)
	m.enqueue(f, f.band)
	m.enter(f)
	return true
}

// Compete records that k wanted a slot at now and found none, without
// joining a wait set: how a caller that polls for capacity keeps the
// fairness figures ([ModelStat.Jain]) meaningful.
func (s *Scheduler) Compete(k policy.Key, weight float64, now time.Time) {
	m := s.lock(k.Model)
	defer m.mu.Unlock()
	f := m.flow(k)
	f.weight = validWeight(weight)
	f.waitedAt = now.UnixNano()
	m.waited(f)
}

// Leave takes k out of its wait set (its request went away). The bucket
// stays backlogged until [Scheduler.Idle].
func (s *Scheduler) Leave(k policy.Key) {
	m := s.lockIf(k.Model)
	if m == nil {
		return
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	if f == nil || f.hidx < 0 {
		return
	}
	m.leave(f)
	m.dequeue(f)
	m.enter(f)
	m.forget(f)
}

// Idle records that k has nothing queued any more: its next Join is a
// return from idleness and is lifted.
func (s *Scheduler) Idle(k policy.Key) {
	m := s.lockIf(k.Model)
	if m == nil {
		return
	}
	defer m.mu.Unlock()
	if f := m.flows[k]; f != nil {
		f.backlogged = false
		m.forget(f)
	}
}

// Waits reports whether bucket k is in its model's wait set.
func (s *Scheduler) Waits(k policy.Key) bool {
	m := s.lockIf(k.Model)
	if m == nil {
		return false
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	return f != nil && f.hidx >= 0
}

// Waiting reports whether any bucket of model name waits for a slot. It
// takes no lock: a bucket that joins as it answers is one that joined
// just after.
func (s *Scheduler) Waiting(name string) bool {
	v, ok := s.models.Load(name)
	return ok && v.(*model).waiting.Load() > 0
}

// enqueue puts f in its band's heap. Requires m.mu held.
func (m *model) enqueue(f *flow, band int) {
	m.heaps[band].push(f)
	m.waiting.Add(1)
}

// dequeue takes f, waiting, out of its band's heap. Requires m.mu held.
func (m *model) dequeue(f *flow) {
	m.heaps[f.band].remove(f.hidx)
	m.waiting.Add(-1)
}

// Grant takes k out of its wait set because a slot was given to it. It
// reports false if k was not waiting.
func (s *Scheduler) Grant(k policy.Key) bool {
	m := s.lockIf(k.Model)
	if m == nil {
		return false
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	if f == nil || f.hidx < 0 {
		return false
	}
	m.leave(f)
	m.take(f)
	m.enter(f)
	return true
}

// GrantHold is Grant and then Hold, under one lock: how a gate hands a
// waiting bucket the slot it took for it.
func (s *Scheduler) GrantHold(k policy.Key, now time.Time) bool {
	m := s.lockIf(k.Model)
	if m == nil {
		return false
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	if f == nil || f.hidx < 0 {
		return false
	}
	m.leave(f)
	m.take(f)
	f.held++
	m.enter(f)
	m.chargeHold(f, now)
	return true
}

// take removes f from its wait set for a grant. Requires m.mu held, f
// waiting and out of m's sums (leave).
func (m *model) take(f *flow) {
	m.dequeue(f)
	m.floor[f.band] = max(m.floor[f.band], f.counter)
	m.grants[f.band]++
}

// leave takes f out of m's active sums before a change to it; enter puts
// it back after the change if it is active then, and recounts it in the
// recent sums (which nothing reads between the two). Requires m.mu held.
func (m *model) leave(f *flow) {
	if !f.active() {
		return
	}
	m.nActive--
	m.active -= f.weight
	m.busy -= f.busy()
	m.bandBusy[f.band] -= f.busy()
	if m.nActive == 0 {
		m.active = 0 // no float residue once nothing is active
	}
}

func (m *model) enter(f *flow) {
	if f.active() {
		m.nActive++
		m.active += f.weight
		m.busy += f.busy()
		m.bandBusy[f.band] += f.busy()
	}
	m.recount(f)
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
