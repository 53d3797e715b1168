package fairshare

import (
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Above is what [Scheduler.ActiveAbove] reports of the bands above a
// bucket's.
type Above struct {
	// Active has bit b set when band b is active.
	Active uint8
	// Running[b] is, for an active band b, how many requests its
	// buckets run or are about to; Idle[b] how many its recent buckets
	// ran at once and do not run now: their clients' next requests,
	// which a calm batch must leave room for. Their sum is what the band
	// runs alone.
	Running, Idle [NumBands]int
	// Busy is how many requests of the model the scheduler counts as
	// running or about to: a request's end reaches the pool before it
	// reaches the scheduler, and Idle counts it only then.
	Busy int
}

// ActiveAbove reports which bands above bucket k's are active on its
// model at now: a bucket of the band waits for a slot, holds or runs
// one, or joined, started or ended a request within DefaultActiveWindow
// (a client between two requests is still there). band is k's band, or
// < 0 for the band it last joined or took a slot in (Join, Hold); a
// bucket the scheduler does not know is normal. The capacity gate keeps
// the batch calm for an active band that asks for it (see
// consume.ConsumerConfig.MaxSlowdown).
func (s *Scheduler) ActiveAbove(k policy.Key, band int, now time.Time) (a Above) {
	if band == 0 {
		return a
	}
	m := s.lockIf(k.Model)
	if m == nil {
		return a
	}
	defer m.mu.Unlock()
	if band < 0 {
		band = 1
		if f := m.flows[k]; f != nil {
			band = f.band
		}
	}
	t := now.UnixNano()
	m.clock = max(m.clock, t)
	m.expire(t)
	a.Busy = m.busy
	window := int64(DefaultActiveWindow)
	for b := range min(band, NumBands) {
		if m.bandBusy[b] > 0 || len(m.heaps[b]) > 0 || t-max(m.seen[b], m.ended[b]) < window {
			a.Active |= 1 << b
			a.Running[b], a.Idle[b] = m.bandBusy[b], m.recent.idle[b]
		}
	}
	return a
}
