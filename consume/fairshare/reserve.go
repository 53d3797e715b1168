package fairshare

import (
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Entitled reports whether bucket k, of band, may take one of a model's
// last free slots, the ones kept in reserve: it is in the high band, or
// no bucket of a higher band has used the model within the half-life and
// it runs fewer requests than its weighted share of the model's total
// slots, shared among the buckets that are waiting for or using them. A
// bucket the scheduler does not know runs nothing.
func (s *Scheduler) Entitled(k policy.Key, band, total int, now time.Time) bool {
	if band == 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.higherBandSeen(k.Model, band, now.UnixNano()) {
		return false
	}
	f := s.flows[k]
	return f == nil || s.entitled(f, total, s.activeWeight(k.Model))
}

// higherBandSeen reports whether a bucket of a band above band joined or
// started on model within the half-life. Requires mu held.
func (s *Scheduler) higherBandSeen(model string, band int, now int64) bool {
	m := s.models[model]
	if m == nil {
		return false
	}
	for b := range band {
		if m.seen[b] != 0 && now-m.seen[b] < int64(s.halfLife*1e9) {
			return true
		}
	}
	return false
}

// BestEntitled is [Scheduler.Best] among the waiting buckets that are
// [Scheduler.Entitled] to a reserved slot; total gives each model's total
// slots. It scans the wait sets, so it is for the reserve, not for every
// grant.
func (s *Scheduler) BestEntitled(models []string, total func(model string) int, now time.Time) (policy.Key, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for b := range NumBands {
		var top *flow
		for _, name := range models {
			m := s.models[name]
			if m == nil || len(m.heaps[b]) == 0 || b > 0 && s.higherBandSeen(name, b, now.UnixNano()) {
				continue
			}
			t, active := total(name), s.activeWeight(name)
			for _, f := range m.heaps[b] {
				if (top == nil || f.before(top)) && s.entitled(f, t, active) {
					top = f
				}
			}
		}
		if top != nil {
			return top.key, true
		}
	}
	return policy.Key{}, false
}

// entitled requires mu held; active is the model's activeWeight.
func (s *Scheduler) entitled(f *flow, total int, active float64) bool {
	if f.band == 0 || active <= 0 {
		return true
	}
	return float64(f.running) < float64(total)*f.weight/active
}

// activeWeight is the sum of the weights of model's buckets that wait
// for or use its slots. Requires mu held.
func (s *Scheduler) activeWeight(model string) float64 {
	if m := s.models[model]; m != nil {
		return m.active
	}
	return 0
}
