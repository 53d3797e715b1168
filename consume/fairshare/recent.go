package fairshare

import (
	"math"
	"time"
)

// DefaultForgetAfter is how long a bucket that neither waits nor runs is
// kept once it is no longer recent: then it is forgotten, its counter
// with it, so that memory is bounded by the buckets active within it.
// A bucket that returns later starts at its band's virtual time, as a
// new one does: any service it got beyond the others before is forgiven.
const DefaultForgetAfter = time.Minute

// recentSet keeps, for one model, the sums over its recent flows (those
// that wait, run, or were seen within the window) that the room decision
// needs, so that [Scheduler.Access] costs the same with ten buckets or
// ten thousand: their weight, and per weight the number of flows by how
// many requests each runs and the most it ran at once while recent (its
// peak). A flow is counted while it is recent; enter recounts it after
// every change, and expire uncounts the flows whose window has passed.
type recentSet struct {
	weight  float64
	classes map[float64]*weightClass
	// idle is, per band, the sum of what its counted flows ran at once
	// and do not run now (peak - busy): the slots a band's recent
	// clients are between two requests on.
	idle [NumBands]int
	// queue holds the counted flows that neither wait nor run, by when
	// they were last seen (roughly: one seen again is moved to the back
	// when it reaches the front).
	queue []*flow
}

// weightClass is the recent flows of one weight, by busy count and peak.
type weightClass struct {
	n    int
	busy map[usage]int
}

// usage is what a recent flow runs now and the most it ran at once.
type usage struct{ busy, peak int }

// count counts f with its weight and usage now, moving it from the
// class it was counted in if they changed.
func (r *recentSet) count(f *flow) {
	f.peak = max(f.peak, f.busy())
	u := usage{f.busy(), f.peak}
	if f.counted {
		if f.cw == f.weight && f.cband == f.band {
			r.move(f, u)
			return
		}
		r.uncount(f)
	}
	if r.classes == nil {
		r.classes = map[float64]*weightClass{}
	}
	c := r.classes[f.weight]
	if c == nil {
		c = &weightClass{busy: map[usage]int{}}
		r.classes[f.weight] = c
	}
	f.counted, f.cw, f.cu, f.cband = true, f.weight, u, f.band
	c.n++
	c.busy[u]++
	r.weight += f.cw
	r.idle[f.cband] += u.idle()
}

// idle is what a flow ran at once and does not run now.
func (u usage) idle() int { return u.peak - u.busy }

// move recounts a counted f in its weight's class with usage u.
func (r *recentSet) move(f *flow, u usage) {
	if f.cu == u {
		return
	}
	c := r.classes[f.cw]
	if c.busy[f.cu]--; c.busy[f.cu] == 0 {
		delete(c.busy, f.cu)
	}
	c.busy[u]++
	r.idle[f.cband] += u.idle() - f.cu.idle()
	f.cu = u
}

func (r *recentSet) uncount(f *flow) {
	if !f.counted {
		return
	}
	f.counted = false
	r.idle[f.cband] -= f.cu.idle()
	c := r.classes[f.cw]
	c.n--
	if c.busy[f.cu]--; c.busy[f.cu] == 0 {
		delete(c.busy, f.cu)
	}
	if c.n == 0 {
		delete(r.classes, f.cw)
	}
	r.weight -= f.cw
	if len(r.classes) == 0 {
		r.weight = 0 // no float residue once nothing is counted
	}
}

// owedExcept sums the slots the counted flows other than self are still
// owed: their share of total, but no more than they have run at once
// while recent (a client with one stream is not kept four slots), beyond
// what they run now; sum is the weight the shares divide. It costs a
// pass over the weights in use and the usages found with each, not over
// the flows.
func (r *recentSet) owedExcept(self *flow, total int, sum float64) float64 {
	var owed float64
	for w, c := range r.classes {
		s := math.Floor(float64(total)*w/sum + 1e-9)
		if s < 1 {
			continue
		}
		for u, n := range c.busy {
			owed += u.owed(s) * float64(n)
		}
	}
	if self.counted {
		owed -= self.cu.owed(math.Floor(float64(total)*self.cw/sum + 1e-9))
	}
	return owed
}

// owed is what a flow of share slots (whole) is owed beyond what it runs.
func (u usage) owed(share float64) float64 {
	return max(min(share, float64(u.peak))-float64(u.busy), 0)
}

// maxWeight is the highest weight counted; 0 when none is.
func (r *recentSet) maxWeight() float64 {
	var top float64
	for w := range r.classes {
		top = max(top, w)
	}
	return top
}

// recount puts f back into m's recent sums after a change, if it is
// recent: active, or seen within the window before the model's clock. An
// inactive flow counted goes in the expiry queue. Requires m.mu held.
func (m *model) recount(f *flow) {
	if !f.active() && m.clock-f.seenAt >= m.s.window {
		m.recent.uncount(f)
		return
	}
	m.recent.count(f)
	if !f.active() && !f.queued {
		f.queued, f.queuedAt = true, f.seenAt
		m.recent.queue = append(m.recent.queue, f)
	}
}

// expire uncounts m's flows whose window passed before t, and forgets
// those the scheduler no longer needs. Requires m.mu held.
func (m *model) expire(t int64) {
	q := m.recent.queue
	for len(q) > 0 {
		f := q[0]
		if !f.active() && f.counted && f.seenAt != f.queuedAt { // seen again: to the back
			f.queuedAt = f.seenAt
			q = append(q[1:], f)
			continue
		}
		if !f.active() && f.counted && t-f.seenAt < m.s.window {
			break
		}
		q[0] = nil
		q = q[1:]
		f.queued = false
		if !f.active() && f.counted {
			m.recent.uncount(f)
			f.peak = 0 // a new busy period when it returns
			m.forget(f)
		}
	}
	m.recent.queue = q
}

// sweep forgets m's flows idle for DefaultForgetAfter before t. Requires
// m.mu held.
func (m *model) sweep(t int64) {
	for len(m.idle) > 0 {
		f := m.idle[0]
		if t-f.seenAt < int64(m.s.forgetAfter) && m.forgettable(f) {
			if f.idleAt == f.seenAt {
				break
			}
			f.idleAt = f.seenAt // seen since it was queued: to the back
			m.idle = append(m.idle[1:], f)
			continue
		}
		m.idle[0] = nil
		m.idle = m.idle[1:]
		f.idleQueued = false
		if m.forgettable(f) {
			m.drop(f)
		}
	}
}

// forgettable: f neither waits, runs, is recent, nor has requests queued.
// Requires m.mu held.
func (m *model) forgettable(f *flow) bool {
	return !f.active() && !f.backlogged && !f.counted && m.flows[f.key] == f
}

// drop deletes f. Requires m.mu held.
func (m *model) drop(f *flow) {
	m.uncompete(f)
	delete(m.flows, f.key)
}
