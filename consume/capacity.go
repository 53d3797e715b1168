package consume

import (
	"slices"
	"sync"
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
// the pool. It is safe for concurrent use. mu guards grants and
// serialises every change to the scheduler's wait sets with them; lock
// order: mu, then the scheduler's and the pool's own locks. The pool
// calls onFree without its locks held.
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

	// backlog and pace read a bucket's queued requests and pacing
	// interval (the Queue's ledger and the Pacer).
	backlog func(policy.Key) int
	pace    func(policy.Key) time.Duration

	mu     sync.Mutex              // guards the fields below
	grants map[policy.Key][]*grant // oldest first
	// parked holds the buckets whose delivery was suspended to wait for a
	// slot and has not had one since: delivered again without one, that
	// is a wake-up that did no work (ReasonCapacityRecheck).
	parked map[policy.Key]bool
	// rechecks holds, per model, a timer that hands out the model's free
	// slots again once the room kept for a recent bucket may have lapsed
	// (see keptRoom): nothing else would, if no request ends meanwhile.
	rechecks map[string]*time.Timer
	closed   bool // no more grants
}

// grant is a slot reserved for one waiting bucket until its delivery.
type grant struct {
	slot  Slot
	timer *time.Timer // gives the slot to the next bucket if unclaimed
}

func newCapacity(cfg ConsumerConfig, q *Queue) *capacity {
	c := &capacity{up: cfg.Upstreams, sched: cfg.Fairness, mode: cfg.Capacity, reserve: cfg.Reserve,
		wait:    capacityWaitBroker,
		backlog: q.Backlog, pace: cfg.Pacer.Interval, grants: map[policy.Key][]*grant{}, parked: map[policy.Key]bool{},
		rechecks: map[string]*time.Timer{}}
	c.hold = c.wait + grantHoldMargin
	if q.Wakeable() {
		// The grant ends the suspension at once: the hold only covers
		// the woken bucket's way back through the engine.
		c.wake, c.wait, c.hold = q.Wake, capacityWaitWakeable, grantHoldMargin
	}
	if c.mode == CapacityFair {
		c.headroom = cfg.Headroom // the poll mode grants nothing, so has no use for it
		c.guard = true
		c.up.OnFree(c.grantFree)
	}
	return c
}

// acquire returns a slot for bucket k: the one granted to it, or a free
// one when no bucket waits for its model. Otherwise k waits in its
// model's wait set; recheck is true when it was waiting already.
func (c *capacity) acquire(k policy.Key, band int, weight float64) (s Slot, ok, recheck bool) {
	if s, ok := c.claim(k); ok {
		return s, true, false
	}
	if c.mode == CapacityPoll {
		if s, ok := c.up.TryAcquire(k.Model); ok {
			return s, true, false
		}
		c.sched.Compete(k, weight, time.Now())
		return nil, false, false
	}
	if s, ok := c.takeNow(k, band); ok {
		return s, true, false
	}
	c.mu.Lock()
	c.sched.Join(k, band, weight, time.Now())
	c.mu.Unlock()
	// A slot may have freed between the try and the join, with nobody
	// waiting to take it: hand it out now, possibly to k itself.
	c.grantFree([]string{k.Model})
	if s, ok := c.claim(k); ok {
		return s, true, false
	}
	c.mu.Lock()
	recheck = c.parked[k]
	c.parked[k] = true
	c.mu.Unlock()
	return nil, false, recheck
}

// mayTake reports whether k may take a free slot of its model now: any
// free slot beyond the reserve, or a reserved one when k is entitled.
func (c *capacity) mayTake(k policy.Key, band int) bool {
	if c.reserve <= 0 || c.mode == CapacityPoll {
		return true
	}
	free, total := c.up.Free(k.Model)
	return free > c.reserve || c.sched.Entitled(k, band, total, time.Now())
}

// takeNow takes a slot for k, which is not granted one, without waiting:
// a free one when no bucket waits for its model, or, when k is owed
// capacity, one past the buckets waiting (they are above their share, or
// they would be owed it too and be served first by grantFree) and into
// the headroom if need be. With headroom, the decision and the take are
// made under mu, so that concurrent deliveries see each other's slots.
func (c *capacity) takeNow(k policy.Key, band int) (Slot, bool) {
	if c.guard {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	access := c.access(k, band)
	var s Slot
	ok := false
	if access != fairshare.AccessWait && !c.sched.Waiting(k.Model) && c.mayTake(k, band) {
		s, ok = c.up.TryAcquire(k.Model)
	}
	if !ok && access == fairshare.AccessHeadroom && !c.sched.Waits(k) {
		s, ok = c.up.TryAcquireHeadroom(k.Model)
	}
	if ok {
		c.sched.Hold(k, time.Now()) // under mu: the next decision sees it
	}
	return s, ok
}

// access is what k may take of its model's slots (see
// [fairshare.Scheduler.Access]); band < 0 means k's band in the wait set.
// Without headroom every bucket may take a slot within the limits.
func (c *capacity) access(k policy.Key, band int) fairshare.Access {
	if !c.guard {
		return fairshare.AccessLimit
	}
	free, total := c.up.Free(k.Model)
	return c.sched.Access(k, band, total-free, total, c.headroom, time.Now())
}

// take takes a slot for the waiting bucket k, as much as it may.
func (c *capacity) take(k policy.Key) (Slot, bool) {
	switch c.access(k, -1) {
	case fairshare.AccessHeadroom:
		return c.up.TryAcquireHeadroom(k.Model)
	case fairshare.AccessLimit:
		return c.up.TryAcquire(k.Model)
	}
	return nil, false
}

// pick is the waiting bucket the next free slot of models goes to: the
// one owed the most or, once the free slots are down to the reserve, the
// one owed the most among those entitled to a reserved slot. Requires mu
// held.
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

// claim takes the oldest slot granted to k, if any.
func (c *capacity) claim(k policy.Key) (Slot, bool) {
	c.mu.Lock()
	gs := c.grants[k]
	if len(gs) == 0 {
		c.mu.Unlock()
		return nil, false
	}
	g := gs[0]
	c.setGrants(k, gs[1:])
	delete(c.parked, k)
	c.mu.Unlock()
	g.timer.Stop()
	return g.slot, true
}

// setGrants stores k's grants. Requires mu held.
func (c *capacity) setGrants(k policy.Key, gs []*grant) {
	if len(gs) == 0 {
		delete(c.grants, k)
		return
	}
	c.grants[k] = gs
}

// forfeit takes k out of the wait set and gives back the slots granted
// to it: its pace says wait longer than a grant is worth holding.
func (c *capacity) forfeit(k policy.Key) {
	c.mu.Lock()
	gs := c.grants[k]
	delete(c.grants, k)
	delete(c.parked, k)
	c.sched.Leave(k)
	c.mu.Unlock()
	c.release(k, gs)
}

// trim gives back the slots granted to k beyond its queued requests: one
// of them went away. k leaves the wait set when nothing of it is queued.
func (c *capacity) trim(k policy.Key) {
	c.mu.Lock()
	queued := c.backlog(k)
	gs := c.grants[k]
	var extra []*grant
	if len(gs) > queued {
		gs, extra = gs[:queued], gs[queued:]
		c.setGrants(k, gs)
	}
	if queued == 0 {
		c.sched.Leave(k)
		delete(c.parked, k)
	}
	c.mu.Unlock()
	c.release(k, extra)
}

// releaseAll gives back every slot still granted (the consumer is
// closing: nobody will claim them).
func (c *capacity) releaseAll() {
	c.mu.Lock()
	c.closed = true
	all := c.grants
	c.grants = map[policy.Key][]*grant{}
	clear(c.parked)
	for m, t := range c.rechecks {
		t.Stop()
		delete(c.rechecks, m)
	}
	c.mu.Unlock()
	for k, gs := range all {
		c.release(k, gs)
	}
}

// release gives k's slots back; the pool calls onFree, so they go on.
func (c *capacity) release(k policy.Key, gs []*grant) {
	for _, g := range gs {
		g.timer.Stop()
		c.unhold(k, g.slot)
	}
}

// unhold releases a slot taken for k that was not used, and gives back
// its Hold first: the release grants the slot on, and the scheduler's
// count of what runs must not hold it then.
func (c *capacity) unhold(k policy.Key, s Slot) {
	c.sched.Unhold(k, time.Now())
	s.Release()
}

// grantFree hands free slots on upstreams serving models to the waiting
// buckets owed the most, and wakes each one, until no slot or no bucket
// is left.
func (c *capacity) grantFree(models []string) {
	models = append([]string(nil), models...) // grantOne narrows it
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

// grantOne grants one slot; models loses the models that have no free
// slot left.
func (c *capacity) grantOne(models *[]string) (policy.Key, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(*models) > 0 && !c.closed {
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
// fair order picked may not take one. Requires mu held.
func (c *capacity) grantOwed(model string) (policy.Key, Slot, bool) {
	free, total := c.up.Free(model)
	k, ok := c.sched.BestOwed(model, total-free, total, c.headroom, time.Now())
	if !ok {
		return policy.Key{Model: model}, nil, false
	}
	s, ok := c.up.TryAcquireHeadroom(model)
	return k, s, ok
}

// hand reserves slot s for k. A bucket with more requests queued than
// slots granted, paced fast enough to use them, stays in the wait set:
// when several slots free at once it may be owed more than one. Requires
// mu held.
func (c *capacity) hand(k policy.Key, s Slot) {
	held := c.grants[k]
	hold := c.hold
	if len(held) > 0 { // a further grant: the bucket is already awake
		hold = grantHoldMargin
	}
	g := &grant{slot: s}
	g.timer = time.AfterFunc(hold, func() { c.expire(k, g) })
	c.grants[k] = append(held, g)
	if c.backlog(k) > len(held)+1 && c.pace(k) <= maxGrantPace {
		c.sched.Rejoin(k)
	}
}

// expire gives an unclaimed grant's slot to the next bucket.
func (c *capacity) expire(k policy.Key, g *grant) {
	c.mu.Lock()
	gs := c.grants[k]
	i := slices.Index(gs, g)
	if i >= 0 {
		c.setGrants(k, slices.Delete(slices.Clone(gs), i, i+1))
	}
	c.mu.Unlock()
	if i >= 0 {
		c.unhold(k, g.slot)
	}
}

// keptRoom arms model's recheck when a waiting bucket was refused a free
// slot: the slot is kept for a recent bucket below its share, and is
// handed out again once that bucket is no longer recent, unless a request
// of the model ends first. Requires mu held.
func (c *capacity) keptRoom(model string) {
	if c.rechecks[model] != nil || c.closed {
		return
	}
	if free, _ := c.up.Free(model); free <= 0 {
		return
	}
	c.rechecks[model] = time.AfterFunc(fairshare.DefaultActiveWindow+time.Millisecond, func() {
		c.mu.Lock()
		delete(c.rechecks, model)
		c.mu.Unlock()
		c.grantFree([]string{model})
	})
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
