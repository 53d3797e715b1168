package fairshare

import (
	"math"
	"slices"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// FlowStat is one bucket's service as the scheduler sees it.
type FlowStat struct {
	Key policy.Key
	// Counter is the bucket's virtual counter: the weighted tokens it has
	// been charged since it was last forgotten, lifts included.
	Counter float64
	// Recent is its weighted service decayed with the half-life: tokens
	// per half-life, roughly.
	Recent float64
	// Share is Recent over the sum of Recent of every bucket of the same
	// model that competed for the pool within the last half-life (0 when
	// it did not).
	Share   float64
	Waiting bool
	Running int
	// Backlogged: the bucket has had requests queued since it last
	// joined the wait set, so its next Join is not a return from
	// idleness and is not lifted (see [Scheduler.Idle]).
	Backlogged bool
}

// ModelStat sums up one model.
type ModelStat struct {
	Model string
	// Waiting counts buckets in the wait set, per band.
	Waiting [NumBands]int
	// Grants counts slots handed to waiting buckets, per band.
	Grants [NumBands]uint64
	// Jain is Jain's fairness index, (Σx)²/(n·Σx²), over the recent
	// weighted service x of the buckets that competed for the pool (were
	// waiting) within the last half-life: 1 when they were served alike,
	// 1/n when one got everything. It is 1 with fewer than two such
	// buckets.
	Jain float64
	// Competing is n, the number of those buckets.
	Competing int
}

// Flow returns k's figures; false if the scheduler holds nothing for k.
func (s *Scheduler) Flow(k policy.Key, now time.Time) (FlowStat, bool) {
	m := s.lockIf(k.Model)
	if m == nil {
		return FlowStat{}, false
	}
	defer m.mu.Unlock()
	f := m.flows[k]
	if f == nil {
		return FlowStat{}, false
	}
	total, _, _ := m.competing(now.UnixNano())
	return m.flowStat(f, now.UnixNano(), total), true
}

// Models returns each model's figures, by name. It takes each model's
// lock in turn.
func (s *Scheduler) Models(now time.Time) []ModelStat {
	var names []string
	s.models.Range(func(name, _ any) bool {
		names = append(names, name.(string))
		return true
	})
	slices.Sort(names)
	out := make([]ModelStat, 0, len(names))
	for _, name := range names {
		if m := s.lockIf(name); m != nil {
			out = append(out, m.stat(name, now.UnixNano()))
			m.mu.Unlock()
		}
	}
	return out
}

// stat is m's figures at t; it forgets what t lets it first. Requires
// m.mu held.
func (m *model) stat(name string, t int64) ModelStat {
	m.expire(t) // what it uncounts, sweep may forget
	m.sweep(t)
	ms := ModelStat{Model: name, Grants: m.grants, Jain: 1}
	for b := range m.heaps {
		ms.Waiting[b] = len(m.heaps[b])
	}
	total, sq, n := m.competing(t)
	ms.Competing = n
	if n >= 2 && sq > 0 {
		// Rounded: the index is scale-free, but the decay leaves float
		// noise in the last digits that would make two scrapes of the
		// same state differ.
		ms.Jain = math.Round(total*total/(float64(n)*sq)*1e9) / 1e9
	}
	return ms
}

// decayedTo is recent decayed to now, without writing it back (decay
// does both).
func (f *flow) decayedTo(now int64, halfLife float64) float64 {
	if f.decayAt != 0 && now > f.decayAt {
		return f.recent * math.Exp2(-float64(now-f.decayAt)/1e9/halfLife)
	}
	return f.recent
}

// flowStat requires m.mu held.
func (m *model) flowStat(f *flow, now int64, total float64) FlowStat {
	st := FlowStat{Key: f.key, Counter: f.counter, Recent: f.decayedTo(now, m.s.halfLife),
		Waiting: f.hidx >= 0, Running: f.running, Backlogged: f.backlogged}
	if total > 0 && f.waitedAt >= now-int64(m.s.halfLife*1e9) && f.waitedAt != 0 {
		st.Share = st.Recent / total
	}
	return st
}
