package fairshare

import (
	"time"

	"github.com/pacegate/pacegate/policy"
)

// ActiveAbove reports which bands above bucket k's are active on its
// model at now, as a bit set (bit b: band b): a bucket of the band waits
// for a slot, holds or runs one, or joined, started or ended a request
// within DefaultActiveWindow (a client between two requests is still
// there). band is k's band, or < 0 for the band of its last Join. The
// capacity gate keeps the batch calm for an active band that asks for it
// (see consume.ConsumerConfig.MaxSlowdown).
func (s *Scheduler) ActiveAbove(k policy.Key, band int, now time.Time) (above uint8) {
	if band == 0 {
		return 0
	}
	m := s.lockIf(k.Model)
	if m == nil {
		return 0
	}
	defer m.mu.Unlock()
	if band < 0 {
		band = 1 // a bucket the scheduler does not know is in the normal band
		if f := m.flows[k]; f != nil {
			band = f.band
		}
	}
	t := now.UnixNano()
	window := int64(DefaultActiveWindow)
	for b := range min(band, NumBands) {
		if m.bandBusy[b] > 0 || len(m.heaps[b]) > 0 || t-max(m.seen[b], m.ended[b]) < window {
			above |= 1 << b
		}
	}
	return above
}
