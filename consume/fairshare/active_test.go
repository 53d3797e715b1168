package fairshare

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// flows is every flow the scheduler holds; the test reads them with no
// call running.
func flows(s *Scheduler) []*flow {
	var all []*flow
	s.models.Range(func(_, m any) bool {
		for _, f := range m.(*model).flows {
			all = append(all, f)
		}
		return true
	})
	return all
}

// modelOf is model name's state, nil if the scheduler has never seen it.
func modelOf(s *Scheduler, name string) *model {
	if v, ok := s.models.Load(name); ok {
		return v.(*model)
	}
	return nil
}

// activeByPass is a model's active weight the slow way: a pass over every
// flow.
func activeByPass(s *Scheduler, model string) float64 {
	var w float64
	for _, f := range flows(s) {
		if f.key.Model == model && f.active() {
			w += f.weight
		}
	}
	return w
}

func busyByPass(s *Scheduler, model string) (n int, byBand [NumBands]int) {
	for _, f := range flows(s) {
		if f.key.Model == model {
			n += f.busy()
			byBand[f.band] += f.busy()
		}
	}
	return n, byBand
}

// TestActiveWeightFollowsEveryChange drives the scheduler through a
// random sequence of every call that changes whether a bucket waits or
// runs (or its band), and checks the kept sums against a pass over the flows after each.
func TestActiveWeightFollowsEveryChange(t *testing.T) {
	s := New(0)
	r := rand.New(rand.NewPCG(1, 2))
	weights := []float64{0.5, 1, 2, 4}
	for i := range 5000 {
		k := key(fmt.Sprint("t", r.IntN(12)))
		switch op := r.IntN(9); op {
		case 0:
			s.Join(k, r.IntN(NumBands), weights[r.IntN(len(weights))], t0)
		case 1:
			s.Rejoin(k)
		case 2:
			s.Leave(k)
		case 3:
			if s.Grant(k) {
				s.Start(k, 10, t0)
			}
		case 4:
			s.Done(k, t0)
		case 5:
			s.Idle(k)
		case 6:
			s.Start(k, 1, t0)
		case 7:
			s.Hold(k, r.IntN(NumBands), weights[r.IntN(len(weights))], t0)
		case 8:
			s.Unhold(k, t0)
		}
		var active float64
		got, gotBands := 0, [NumBands]int{}
		if m := modelOf(s, "m"); m != nil {
			active, got, gotBands = m.active, m.busy, m.bandBusy
		}
		if want := activeByPass(s, "m"); abs(active-want) > 1e-9 {
			t.Fatalf("step %d: kept active weight %v, a pass over the flows gives %v", i, active, want)
		}
		if want, wantBands := busyByPass(s, "m"); got != want || gotBands != wantBands {
			t.Fatalf("step %d: kept busy count %d, by band %v; a pass over the flows gives %d, %v", i, got, gotBands, want, wantBands)
		}
	}
}

func abs(x float64) float64 { return max(x, -x) }
