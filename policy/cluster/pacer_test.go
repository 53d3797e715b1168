package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

type rateOf float64

func (r rateOf) BaseRate(policy.Key) (float64, bool) { return float64(r), false }

// TestPacerBatchKeepsTheGrid: a bucket whose shared schedule is 15.5 ms
// behind (within the 20 ms tolerance, so the grid holds) and that has 8
// requests queued here takes 8 slots in one round trip, all of them
// passed already at 1,000/s: the 8 release at once, as policy.Pacer
// releases a bucket catching up. Slots counted from now instead would
// hold the second request 1 ms, the eighth 7 ms.
func TestPacerBatchKeepsTheGrid(t *testing.T) {
	s := newTestStore(t, testPrefix(t), 1)
	p := NewPacer(s, policy.NewPacer(rateOf(1000)))
	p.CountQueued(func(policy.Key) int { return 8 })
	k := policy.Key{Tenant: "t", Model: "m"}
	behind := time.Now().Add(-15500 * time.Microsecond).UnixMicro()
	if err := s.rdb.Set(context.Background(), s.key("pace", k, ""), strconv.FormatInt(behind, 10), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	trips := s.Stats().RoundTrips
	for i := range 8 {
		if wait := p.AcquireOrSuspend(k, 1); wait != 0 {
			t.Fatalf("release %d of 8 waits %v: its slot (%d ms behind now) has come", i+1, wait, 15-i)
		}
	}
	if got := s.Stats().RoundTrips - trips; got != 1 {
		t.Errorf("%d round trips for a batch of 8, want 1", got)
	}
}
