package consume

import (
	"slices"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// gate is one model's part of the capacity gate: the slots granted to
// its waiting buckets. mu guards its fields.
type gate struct {
	mu     sync.Mutex
	grants map[policy.Key][]*grant // oldest first
	// parked holds the buckets whose delivery was suspended to wait for a
	// slot and has not had one since: delivered again without one, that
	// is a wake-up that did no work (ReasonCapacityRecheck).
	parked map[policy.Key]bool
	// recheck hands out the model's free slots again once the room kept
	// for a recent bucket may have lapsed (see keptRoom): nothing else
	// would, if no request ends meanwhile.
	recheck *time.Timer
}

// grant is a slot reserved for one waiting bucket until its delivery.
type grant struct {
	slot  Slot
	timer *time.Timer // gives the slot to the next bucket if unclaimed
}

// gate returns model's gate, made if need be.
func (c *capacity) gate(model string) *gate {
	g, ok := c.gates.Load(model)
	if !ok {
		g, _ = c.gates.LoadOrStore(model, &gate{grants: map[policy.Key][]*grant{}, parked: map[policy.Key]bool{}})
	}
	return g.(*gate)
}

// lock locks model's gate and returns it; the caller unlocks it.
func (c *capacity) lock(model string) *gate {
	g := c.gate(model)
	g.mu.Lock()
	return g
}

// claim takes the oldest slot granted to k, if any.
func (c *capacity) claim(k policy.Key) (Slot, bool) {
	g := c.lock(k.Model)
	first, ok := g.claim(k)
	g.mu.Unlock()
	if !ok {
		return nil, false
	}
	return first.take(), true
}

// claim takes k's oldest grant out of the gate, if it has one; the
// caller calls its take once the lock is dropped. Requires g.mu held.
func (g *gate) claim(k policy.Key) (*grant, bool) {
	gs := g.grants[k]
	if len(gs) == 0 {
		return nil, false
	}
	g.setGrants(k, gs[1:])
	delete(g.parked, k)
	return gs[0], true
}

// take stops the grant's timer and returns its slot.
func (gr *grant) take() Slot {
	gr.timer.Stop()
	return gr.slot
}

// setGrants stores k's grants. Requires g.mu held.
func (g *gate) setGrants(k policy.Key, gs []*grant) {
	if len(gs) == 0 {
		delete(g.grants, k)
		return
	}
	g.grants[k] = gs
}

// forfeit takes k out of the wait set and gives back the slots granted
// to it: its pace says wait longer than a grant is worth holding.
func (c *capacity) forfeit(k policy.Key) {
	g := c.lock(k.Model)
	gs := g.grants[k]
	delete(g.grants, k)
	delete(g.parked, k)
	c.sched.Leave(k)
	g.mu.Unlock()
	c.release(k, gs)
}

// trim gives back the slots granted to k beyond its queued requests: one
// of them went away. k leaves the wait set when nothing of it is queued.
func (c *capacity) trim(k policy.Key) {
	g := c.lock(k.Model)
	queued := c.backlog(k)
	gs := g.grants[k]
	var extra []*grant
	if len(gs) > queued {
		gs, extra = splitGrants(gs, queued)
		g.setGrants(k, gs)
	}
	if queued == 0 {
		c.sched.Leave(k)
		delete(g.parked, k)
	}
	g.mu.Unlock()
	c.release(k, extra)
}

// splitGrants splits gs after its first n: the grants kept and those to
// give back. The kept ones get a slice of their own capacity: the next
// grant appended to them, under the gate's lock, must not overwrite the
// ones given back, which are released after the lock is dropped.
func splitGrants(gs []*grant, n int) (keep, extra []*grant) {
	return gs[:n:n], gs[n:]
}

// releaseAll gives back every slot still granted (the consumer is
// closing: nobody will claim them). closed is set first: a grant made
// before it is in its gate when the gate is emptied here, and none is
// made after it (grantOne reads it under the gate's lock).
func (c *capacity) releaseAll() {
	c.closed.Store(true)
	c.gates.Range(func(_, v any) bool {
		g := v.(*gate)
		g.mu.Lock()
		all := g.grants
		g.grants = map[policy.Key][]*grant{}
		clear(g.parked)
		if g.recheck != nil {
			g.recheck.Stop()
			g.recheck = nil
		}
		g.mu.Unlock()
		for k, gs := range all {
			c.release(k, gs)
		}
		return true
	})
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

// hand reserves slot s for k. A bucket with more requests queued than
// slots granted, paced fast enough to use them, stays in the wait set:
// when several slots free at once it may be owed more than one. Requires
// k's gate locked.
func (c *capacity) hand(k policy.Key, s Slot) {
	gt := c.gate(k.Model)
	held := gt.grants[k]
	hold := c.hold
	if len(held) > 0 { // a further grant: the bucket is already awake
		hold = grantHoldMargin
	}
	g := &grant{slot: s}
	g.timer = time.AfterFunc(hold, func() { c.expire(k, g) })
	gt.grants[k] = append(held, g)
	if c.backlog(k) > len(held)+1 && c.pace(k) <= maxGrantPace {
		c.sched.Rejoin(k)
	}
}

// expire gives an unclaimed grant's slot to the next bucket.
func (c *capacity) expire(k policy.Key, g *grant) {
	gt := c.lock(k.Model)
	gs := gt.grants[k]
	i := slices.Index(gs, g)
	if i >= 0 {
		gt.setGrants(k, slices.Delete(slices.Clone(gs), i, i+1))
	}
	gt.mu.Unlock()
	if i >= 0 {
		c.unhold(k, g.slot)
	}
}

// keptRoom arms model's recheck when a waiting bucket was refused a free
// slot: the slot is kept for a recent bucket below its share, and is
// handed out again once that bucket is no longer recent, unless a request
// of the model ends first. Requires model's gate locked.
func (c *capacity) keptRoom(model string) {
	g := c.gate(model)
	if g.recheck != nil || c.closed.Load() {
		return
	}
	if free, _ := c.up.Free(model); free <= 0 {
		return
	}
	g.recheck = time.AfterFunc(fairshare.DefaultActiveWindow+time.Millisecond, func() {
		g.mu.Lock()
		g.recheck = nil
		g.mu.Unlock()
		c.grantModel(model)
	})
}
