package consume

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// CapacityMode selects how the pool's capacity is shared when it, not a
// bucket's own rate, is the limit.
type CapacityMode uint8

const (
	// CapacityFair grants each freed slot to the waiting bucket that is
	// owed the most (package fairshare); a waiting bucket holds no worker
	// and nothing polls.
	CapacityFair CapacityMode = iota
	// CapacityPoll is the earlier design, kept to measure against: a
	// bucket that finds no free slot is suspended for CapacityBackoff and
	// tries again, so the next free slot goes to whoever asks first.
	CapacityPoll
)

// Suspension reasons for capacity, passed to Observer.Suspended.
const (
	// ReasonCapacity: the bucket joined its model's wait set (fair mode)
	// or was suspended for the poll backoff (poll mode).
	ReasonCapacity = "capacity"
	// ReasonCapacityRecheck: a bucket already waiting for a slot was
	// delivered again without one: a wake-up that did no work. In fair
	// mode on a backend that can be woken it only happens after
	// capacityWaitWakeable; on RocketMQ it is the bounded poll described
	// at capacityWaitBroker.
	ReasonCapacityRecheck = "capacity_recheck"
)

const (
	// capacityWaitWakeable is how long a waiting bucket stays suspended on
	// a backend that can be woken: the grant wakes it, and this is only a
	// backstop against a lost wake, which would be a bug. It is long, so
	// that waiting is not polling: a weight-1 bucket beside heavier ones
	// may wait for a grant for many seconds, and at 10,000 waiting buckets
	// a 5 s backstop would be 2,000 wake-ups a second that did no work. The
	// requests of a bucket whose wake was lost would still end, by the
	// client's timeout or request_timeout.
	capacityWaitWakeable = time.Minute
	// capacityWaitBroker is how long a waiting bucket is suspended on a
	// backend whose suspensions cannot be ended early (RocketMQ): the
	// freed slot is held for it, idle, until its next delivery, so this
	// (the Go client's shortest Suspend) plus the broker's re-dispatch
	// tick bounds both the granted bucket's extra wait and the slot's idle
	// time, at the cost of one delivery per waiting bucket per period.
	capacityWaitBroker = 50 * time.Millisecond
	// grantHoldMargin is how much longer than its suspension a granted
	// bucket's slot is held before it goes to the next bucket, on a
	// backend that cannot be woken; on one that can, the wake ends the
	// suspension and this is the whole hold. A bucket's further grants
	// (see maxGrantPace) are held this long.
	grantHoldMargin = time.Second
	// maxGrantPace is the longest pacing interval at which a bucket with
	// more requests queued stays in the wait set after a grant, so that
	// it can be owed, and granted, several slots at once (slots often free
	// together); its next requests follow within a few of these intervals.
	// A slower bucket could not use a second slot soon enough to hold it.
	maxGrantPace = 10 * time.Millisecond
)

// capacity is the gate between a bucket that may release a request and
// the pool. It is safe for concurrent use. Each model has a gate of its
// own, whose lock guards its grants and serialises every change to the
// model's wait set with them: one model's grants never wait on another's.
// Handing out the free slots of an upstream that serves several models
// (grantOne) takes their gates' locks in the order of the models' names.
// Lock order: gates, then the scheduler's and the pool's own locks. The
// pool calls onFree without its locks held.
type capacity struct {
	up    Upstreams
	sched *fairshare.Scheduler
	mode  CapacityMode
	wake  func(policy.Key) bool // nil on a backend that cannot be woken
	wait  time.Duration         // how long a waiting bucket is suspended
	hold  time.Duration         // how long a grant is held for its bucket
	// reserve is how many of a model's free slots only a bucket entitled
	// to them may take (see [fairshare.Scheduler.Entitled]).
	reserve int
	// headroom is how many requests of a model may run beyond its
	// limits, for buckets owed capacity (ConsumerConfig.Headroom).
	headroom int
	// guard is true in fair mode: a bucket above its weighted share takes
	// a slot only while the slots owed to the model's recent buckets
	// below their share stay free (see [fairshare.Scheduler.Access]).
	guard bool
	// calmer and slowdown keep the batch calm for an active band that
	// bounds its slowdown (ConsumerConfig.MaxSlowdown; a band's entry is
	// +Inf when it bounds nothing). calmer is nil when no band does, or
	// the upstreams cannot tell.
	calmer   Calmer
	slowdown [fairshare.NumBands]float64

	// backlog and pace read a bucket's queued requests and pacing
	// interval (the Queue's ledger and the Pacer).
	backlog func(policy.Key) int
	pace    func(policy.Key) time.Duration

	// gates holds each model's gate by name (string → *gate): a gate,
	// once made, is kept. A sync.Map, so that finding one writes nothing
	// shared between the cores.
	gates  sync.Map
	closed atomic.Bool // no more grants; read under a gate's lock (see releaseAll)
}

func newCapacity(cfg ConsumerConfig, q *Queue) *capacity {
	c := &capacity{up: cfg.Upstreams, sched: cfg.Fairness, mode: cfg.Capacity, reserve: cfg.Reserve,
		wait:    capacityWaitBroker,
		backlog: q.Backlog, pace: cfg.Pacer.Interval}
	c.hold = c.wait + grantHoldMargin
	if q.Wakeable() {
		// The grant ends the suspension at once: the hold only covers
		// the woken bucket's way back through the engine.
		c.wake, c.wait, c.hold = q.Wake, capacityWaitWakeable, grantHoldMargin
	}
	if c.mode == CapacityFair {
		c.headroom = cfg.Headroom // the poll mode grants nothing, so has no use for it
		c.guard = true
		c.calmFor(cfg.MaxSlowdown)
		c.up.OnFree(c.grantFree)
	}
	return c
}

// calmFor sets the bands' slowdown bounds, and calmer when one bounds
// something and the upstreams can tell.
func (c *capacity) calmFor(bounds [fairshare.NumBands]float64) {
	calmer, _ := c.up.(Calmer)
	for b, f := range bounds {
		c.slowdown[b] = math.Inf(1)
		if f >= 1 && !math.IsInf(f, 1) {
			c.slowdown[b], c.calmer = f, calmer
		}
	}
}

// calmed reports whether k, of band (< 0: its band in the wait set),
// must wait to keep its model's batch calm for an active higher band
// that bounds its slowdown: the model runs as many requests as its
// upstreams may while that band's run within its bound of their speed
// with the band alone, counting the requests its clients are between (a
// closed-loop client's next request comes a moment after its last, and
// must not find the batch filled meanwhile). What runs is the later of
// the pool's count and the scheduler's: a request's end reaches the pool
// first, and the consumer grants again once it reaches the scheduler
// (Consumer.ended).
func (c *capacity) calmed(k policy.Key, band int, now time.Time) bool {
	if c.calmer == nil {
		return false
	}
	above := c.sched.ActiveAbove(k, band, now)
	factor, coming, own := math.Inf(1), 0, 0
	for b := range fairshare.NumBands {
		if above.Active&(1<<b) != 0 && !math.IsInf(c.slowdown[b], 1) {
			factor = min(factor, c.slowdown[b])
			coming += above.Idle[b]
			own += above.Running[b] + above.Idle[b]
		}
	}
	if math.IsInf(factor, 1) {
		return false
	}
	running, calm := c.calmer.Calm(k.Model, factor, own)
	return max(running, above.Busy)+coming >= calm
}

// acquire returns a slot for bucket k: the one granted to it, or a free
// one when no bucket waits for its model. Otherwise k waits in its
// model's wait set; recheck is true when it was waiting already. now is
// the delivery's one reading of the clock (see Consumer.Handle).
func (c *capacity) acquire(k policy.Key, band int, weight float64, now time.Time) (s Slot, ok, recheck bool) {
	g := c.gate(k.Model)
	if c.mode == CapacityPoll {
		return c.poll(g, k, weight, now)
	}
	if s, ok := c.grantedOrFree(g, k, band, weight, now); ok {
		return s, true, false
	}
	return c.join(g, k, band, weight, now)
}

// grantedOrFree is the slot granted to k, or else a free one that k may
// take now (takeNow), looked for under one hold of the gate: this is
// every delivery's way to its slot.
func (c *capacity) grantedOrFree(g *gate, k policy.Key, band int, weight float64, now time.Time) (Slot, bool) {
	g.mu.Lock()
	if first, ok := g.claim(k); ok {
		g.mu.Unlock()
		return first.take(), true
	}
	s, ok := c.takeNow(k, band, weight, now)
	g.mu.Unlock()
	return s, ok
}

// join puts k in its model's wait set, which found no slot; recheck is
// true when it was waiting already.
func (c *capacity) join(g *gate, k policy.Key, band int, weight float64, now time.Time) (s Slot, ok, recheck bool) {
	g.mu.Lock()
	c.sched.Join(k, band, weight, now)
	g.mu.Unlock()
	// A slot may have freed between the try and the join, with nobody
	// waiting to take it: hand it out now, possibly to k itself.
	c.grantModel(k.Model)
	if s, ok := c.claim(k); ok {
		return s, true, false
	}
	g.mu.Lock()
	recheck = g.parked[k]
	g.parked[k] = true
	g.mu.Unlock()
	return nil, false, recheck
}

// poll is acquire in poll mode: a slot granted to k, or a free one, or
// none.
func (c *capacity) poll(g *gate, k policy.Key, weight float64, now time.Time) (Slot, bool, bool) {
	g.mu.Lock()
	first, granted := g.claim(k)
	g.mu.Unlock()
	if granted {
		return first.take(), true, false
	}
	if s, ok := c.up.TryAcquire(k.Model); ok {
		return s, true, false
	}
	c.sched.Compete(k, weight, now)
	return nil, false, false
}

// mayTake reports whether k may take a free slot of its model now: any
// free slot beyond the reserve, or a reserved one when k is entitled.
func (c *capacity) mayTake(k policy.Key, band int, now time.Time) bool {
	if c.reserve <= 0 || c.mode == CapacityPoll {
		return true
	}
	free, total := c.up.Free(k.Model)
	return free > c.reserve || c.sched.Entitled(k, band, total, now)
}

// takeNow takes a slot for k, which is not granted one, without waiting:
// a free one when no bucket waits for its model, or, when k is owed
// capacity, one past the buckets waiting (they are above their share, or
// they would be owed it too and be served first by grantFree) and into
// the headroom if need be. With headroom, the decision and the take are
// made under the model's gate, so that concurrent deliveries see each
// other's slots. Requires the gate's lock held (fair mode only).
func (c *capacity) takeNow(k policy.Key, band int, weight float64, now time.Time) (Slot, bool) {
	access := c.access(k, band, now)
	var s Slot
	ok := false
	if access != fairshare.AccessWait && !c.sched.Waiting(k.Model) && c.mayTake(k, band, now) {
		s, ok = c.up.TryAcquire(k.Model)
	}
	if !ok && access == fairshare.AccessHeadroom && !c.sched.Waits(k) {
		s, ok = c.up.TryAcquireHeadroom(k.Model)
	}
	if ok {
		c.sched.Hold(k, band, weight, now) // under the gate: the next decision sees it
	}
	return s, ok
}

// access is what k may take of its model's slots (see
// [fairshare.Scheduler.Access]); band < 0 means k's band in the wait set.
// In poll mode every bucket may take a slot within the limits; in fair
// mode a bucket waits while its model's batch is kept calm for a higher
// band (calmed).
func (c *capacity) access(k policy.Key, band int, now time.Time) fairshare.Access {
	if !c.guard {
		return fairshare.AccessLimit
	}
	if c.calmed(k, band, now) {
		return fairshare.AccessWait
	}
	free, total := c.up.Free(k.Model)
	return c.sched.Access(k, band, total-free, total, c.headroom, now)
}

// take takes a slot for the waiting bucket k, as much as it may.
func (c *capacity) take(k policy.Key) (Slot, bool) {
	switch c.access(k, -1, time.Now()) {
	case fairshare.AccessHeadroom:
		return c.up.TryAcquireHeadroom(k.Model)
	case fairshare.AccessLimit:
		return c.up.TryAcquire(k.Model)
	}
	return nil, false
}

// pick is the waiting bucket the next free slot of models goes to: the
// one owed the most or, once the free slots are down to the reserve, the
// one owed the most among those entitled to a reserved slot. Requires the
// models' gates locked.
func (c *capacity) pick(models []string) (policy.Key, bool) {
	k, ok := c.sched.Best(models)
	if !ok || c.reserve <= 0 {
		return k, ok
	}
	if free, _ := c.up.Free(k.Model); free > c.reserve {
		return k, true
	}
	return c.sched.BestEntitled(models, func(m string) int { _, total := c.up.Free(m); return total }, time.Now())
}

// grantFree hands free slots on upstreams serving models to the waiting
// buckets owed the most, and wakes each one, until no slot or no bucket
// is left.
func (c *capacity) grantFree(models []string) {
	if c.anyWaiting(models) { // most frees: nothing to grant, nothing locked
		c.grantWaiting(models)
	}
}

// grantWaiting is grantFree once a bucket of one of models was seen
// waiting.
func (c *capacity) grantWaiting(models []string) {
	models = slices.Clone(models)   // grantOne narrows it
	slices.Sort(models)             // the order grantOne locks their gates in,
	models = slices.Compact(models) // each once
	for {
		k, ok := c.grantOne(&models)
		if !ok {
			return
		}
		if c.wake != nil {
			c.wake(k)
		}
	}
}

// anyWaiting reports whether a bucket of one of models waits for a slot.
// A bucket that joins after it answered no takes a free slot itself: it
// calls grantFree after it joins (acquire).
func (c *capacity) anyWaiting(models []string) bool {
	for _, m := range models {
		if c.sched.Waiting(m) {
			return true
		}
	}
	return false
}

// grantModel is grantFree for one model, which allocates nothing unless a
// bucket of it waits.
func (c *capacity) grantModel(model string) {
	if c.sched.Waiting(model) {
		c.grantWaiting([]string{model})
	}
}

// grantOne grants one slot; models (sorted) loses the models that have
// no free slot left. It holds their gates' locks throughout: the free
// slots are theirs together, and go in one fair order.
func (c *capacity) grantOne(models *[]string) (policy.Key, bool) {
	gates := make([]*gate, len(*models))
	for i, m := range *models {
		gates[i] = c.lock(m)
	}
	defer func() {
		for _, g := range gates {
			g.mu.Unlock()
		}
	}()
	for len(*models) > 0 && !c.closed.Load() {
		k, ok := c.pick(*models)
		if !ok {
			return k, false
		}
		s, ok := c.take(k)
		if !ok && c.guard {
			k, s, ok = c.grantOwed(k.Model)
		}
		if !ok {
			c.keptRoom(k.Model)
			*models = without(*models, k.Model)
			continue
		}
		c.sched.GrantHold(k, time.Now())
		c.hand(k, s)
		return k, true
	}
	return policy.Key{}, false
}

// grantOwed takes a slot, the headroom included, for the waiting
// bucket of model owed capacity that is owed the most: the bucket the
// fair order picked may not take one. Requires model's gate locked.
func (c *capacity) grantOwed(model string) (policy.Key, Slot, bool) {
	free, total := c.up.Free(model)
	now := time.Now()
	k, ok := c.sched.BestOwed(model, total-free, total, c.headroom, now)
	if !ok || c.calmed(k, -1, now) {
		return policy.Key{Model: model}, nil, false
	}
	s, ok := c.up.TryAcquireHeadroom(model)
	return k, s, ok
}

func without(models []string, m string) []string {
	out := models[:0]
	for _, x := range models {
		if x != m {
			out = append(out, x)
		}
	}
	return out
}
