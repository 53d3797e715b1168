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
	m := s.lockIf(k.Model)
	if m == nil {
		return true
	}
	defer m.mu.Unlock()
	if m.higherBandSeen(band, now.UnixNano()) {
		return false
	}
	f := m.flows[k]
	return f == nil || entitled(f, total, m.active)
}

// higherBandSeen reports whether a bucket of a band above band joined or
// started on m within the half-life. Requires m.mu held.
func (m *model) higherBandSeen(band int, now int64) bool {
	for b := range band {
		if m.seen[b] != 0 && now-m.seen[b] < int64(m.s.halfLife*1e9) {
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
	return s.bestOf(models, func(m *model) (head, bool) {
		return m.bestEntitled(total, now.UnixNano())
	})
}

// bestEntitled is m's first waiting bucket, in band order, entitled to a
// reserved slot. Requires m.mu held.
func (m *model) bestEntitled(total func(model string) int, now int64) (head, bool) {
	for b := range NumBands {
		if len(m.heaps[b]) == 0 || b > 0 && m.higherBandSeen(b, now) {
			continue
		}
		t := total(m.heaps[b][0].key.Model)
		var top *flow
		for _, f := range m.heaps[b] {
			if (top == nil || f.before(top)) && entitled(f, t, m.active) {
				top = f
			}
		}
		if top != nil {
			return top.head(), true
		}
	}
	return head{}, false
}

// entitled requires f's model's lock held; active is the model's active
// weight.
func entitled(f *flow, total int, active float64) bool {
	if f.band == 0 || active <= 0 {
		return true
	}
	return float64(f.running) < float64(total)*f.weight/active
}
