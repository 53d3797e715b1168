package fairshare

import (
	"time"

	"github.com/pacegate/pacegate/policy"
)

// DefaultActiveWindow is how long a bucket stays recent after it last
// joined a wait set, started a request or ended one: long enough to cover
// a client's pause between an answer and its next request, so that the
// room it is owed is kept while it reads.
const DefaultActiveWindow = time.Second

// Access is what a bucket may take of a saturated model's slots; see
// [Scheduler.Access].
type Access uint8

const (
	// AccessWait: nothing now; wait in the wait set for a grant.
	AccessWait Access = iota
	// AccessLimit: a slot within the upstreams' concurrency limits.
	AccessLimit
	// AccessHeadroom: a slot within the limits or, failing that, in the
	// headroom beyond them.
	AccessHeadroom
)

// Access decides what bucket k may take of its model's slots now, when
// the model's upstreams run running requests and have total slots within
// their limits, and the gateway may run headroom more beyond them. band
// is k's band, or < 0 for the band of its last Join.
//
// A bucket that is owed capacity (the high band, or a bucket running
// fewer requests than its weighted share of total among the model's
// recent buckets, with no higher band recent) may take any slot, the
// headroom included, up to total+headroom requests of the model. Any
// other bucket may take a slot within the limits only while the model's
// running requests plus the slots still owed to its other recent buckets
// stay below total+headroom: that room is kept for a bucket below its
// share that pauses between requests, so that its next request starts at
// once instead of waiting for a long generation to end. With headroom 0
// the kept room is within the limits: the pool is work-conserving except
// for the slots owed to recent buckets, idle only between their requests
// (at most DefaultActiveWindow).
//
// It takes a pass over the model's buckets when k is not owed.
func (s *Scheduler) Access(k policy.Key, band, running, total, headroom int, now time.Time) Access {
	m := s.lockIf(k.Model)
	if m == nil { // nothing runs
		return AccessHeadroom
	}
	defer m.mu.Unlock()
	t := now.UnixNano()
	m.clock = max(m.clock, t)
	f := m.flows[k]
	if f == nil { // a bucket new to the model, of weight 1 until it joins
		f = &flow{key: k, m: m, band: max(band, 0), weight: 1, hidx: -1}
	}
	if band < 0 {
		band = f.band
	}
	// The pool may count a request's end before its Done: the
	// scheduler's own count is the later of the two.
	running = max(running, m.busy)
	m.expire(t)
	sum := m.recent.weight
	if !f.counted {
		sum += f.weight
	}
	if band == 0 || !m.higherBandSeen(band, t) && owes(f, total, sum) {
		return headroomIf(running < total+headroom)
	}
	if float64(running)+m.recent.owedExcept(f, total, sum) < float64(total+headroom) {
		return AccessLimit
	}
	return AccessWait
}

func headroomIf(room bool) Access {
	if room {
		return AccessHeadroom
	}
	return AccessLimit
}

// BestOwed is the waiting bucket of model, in band order and then by
// [Scheduler.Best]'s order, that is owed capacity as [Scheduler.Access]
// defines it, while the model runs fewer than total+headroom requests.
// The high band's is its heap's top; below it, it scans the band's wait
// set, and only while some recent bucket's share is a slot or more (so
// not with thousands of buckets sharing a few slots).
func (s *Scheduler) BestOwed(model string, running, total, headroom int, now time.Time) (policy.Key, bool) {
	m := s.lockIf(model)
	if m == nil {
		return policy.Key{}, false
	}
	defer m.mu.Unlock()
	if max(running, m.busy) >= total+headroom {
		return policy.Key{}, false
	}
	t := now.UnixNano()
	m.expire(t)
	sum := m.recent.weight
	// No bucket outside the high band is owed a slot while every share
	// is below one: then only the high band's heap is looked at.
	someOwed := sum <= 0 || float64(total)*m.recent.maxWeight()/sum >= 1-1e-9
	for b := range NumBands {
		if b > 0 && (!someOwed || m.higherBandSeen(b, t)) {
			continue
		}
		if b == 0 && len(m.heaps[0]) > 0 {
			return m.heaps[0][0].key, true
		}
		var top *flow
		for _, f := range m.heaps[b] {
			if (top == nil || f.before(top)) && owes(f, total, sum) {
				top = f
			}
		}
		if top != nil {
			return top.key, true
		}
	}
	return policy.Key{}, false
}

// owes reports whether one more request of f would stay within its
// weighted share of total, where sum is the weight of the model's recent
// buckets. A share's fraction is not owed: the fair order decides who
// gets the slots it leaves (otherwise a bucket of share 1.1 would be owed
// a second slot, and a bucket of share 2.3 a third).
func owes(f *flow, total int, sum float64) bool {
	return sum <= 0 || float64(f.busy()+1) <= share(f, total, sum)+1e-9
}

func share(f *flow, total int, sum float64) float64 { return float64(total) * f.weight / sum }
