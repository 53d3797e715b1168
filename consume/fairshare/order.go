package fairshare

import "github.com/pacegate/pacegate/policy"

// head is a waiting flow's place in the fair order, copied out under its
// model's lock so that flows of different models can be compared without
// holding both locks.
type head struct {
	key     policy.Key
	band    int
	counter float64
	running int
	seq     uint64
}

func (f *flow) head() head {
	return head{key: f.key, band: f.band, counter: f.counter, running: f.running, seq: f.seq}
}

// before is the fair order: the higher band (lower number), then the
// lowest counter, then the one with fewer requests running (a bucket
// lifted to the others' counter on its return is not made to wait behind
// one that holds many slots), then the earliest join.
func (h head) before(g head) bool {
	if h.band != g.band {
		return h.band < g.band
	}
	return inBand(h.counter, h.running, h.seq, g.counter, g.running, g.seq)
}

// before orders flows within a band (see head.before).
func (f *flow) before(g *flow) bool {
	return inBand(f.counter, f.running, f.seq, g.counter, g.running, g.seq)
}

// inBand is the fair order within a band: whether the flow of counter
// c1, running r1 and join order s1 goes before the other.
func inBand(c1 float64, r1 int, s1 uint64, c2 float64, r2 int, s2 uint64) bool {
	if c1 != c2 {
		return c1 < c2
	}
	if r1 != r2 {
		return r1 < r2
	}
	return s1 < s2
}

// Best returns the bucket that the next slot for one of models should go
// to: the highest band with a waiting bucket, then the lowest counter,
// then the earliest join. It takes nothing; see [Scheduler.Grant]. With
// several models it reads each one's wait sets under that model's lock in
// turn: a caller that must act on the answer checks it again under the
// bucket's own (Grant reports false for a bucket no longer waiting).
func (s *Scheduler) Best(models []string) (policy.Key, bool) {
	return s.bestOf(models, (*model).top)
}

// bestOf is the first, in the fair order, of pick's answer for each of
// models, each taken under its model's lock.
func (s *Scheduler) bestOf(models []string, pick func(*model) (head, bool)) (policy.Key, bool) {
	var best head
	found := false
	for _, name := range models {
		m := s.lockIf(name)
		if m == nil {
			continue
		}
		h, ok := pick(m)
		m.mu.Unlock()
		if ok && (!found || h.before(best)) {
			best, found = h, true
		}
	}
	return best.key, found
}

// top is the head of m's highest non-empty band. Requires m.mu held.
func (m *model) top() (head, bool) {
	for b := range m.heaps {
		if len(m.heaps[b]) > 0 {
			return m.heaps[b][0].head(), true
		}
	}
	return head{}, false
}
