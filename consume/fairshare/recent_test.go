package fairshare

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// checkRecent compares m's kept recent sums with a pass over the flows:
// the counted flows sum to the kept weight and classes; every active flow
// is counted; an idle flow seen within the window is counted, and none
// seen two windows ago is (expire may run a window late for a flow that
// queued behind a later one).
func checkRecent(t *testing.T, step int, s *Scheduler, m *model) {
	t.Helper()
	var w float64
	var idle [NumBands]int
	classes := map[float64]map[usage]int{}
	for _, f := range m.flows {
		age := m.clock - f.seenAt
		switch {
		case f.active() && !f.counted:
			t.Fatalf("step %d: %s active and not counted", step, f.key)
		case !f.active() && age < s.window && !f.counted:
			t.Fatalf("step %d: %s seen %v ago and not counted", step, f.key, time.Duration(age))
		case !f.active() && age >= 2*s.window && f.counted:
			t.Fatalf("step %d: %s seen %v ago and still counted", step, f.key, time.Duration(age))
		}
		if f.counted {
			if u := (usage{f.busy(), f.peak}); f.cw != f.weight || f.cu != u || f.cband != f.band {
				t.Fatalf("step %d: %s counted as weight %v %+v band %d, is %v %+v band %d", step, f.key, f.cw, f.cu, f.cband, f.weight, u, f.band)
			}
			idle[f.band] += f.cu.idle()
			w += f.weight
			if classes[f.weight] == nil {
				classes[f.weight] = map[usage]int{}
			}
			classes[f.weight][f.cu]++
		}
	}
	if idle != m.recent.idle {
		t.Fatalf("step %d: kept idle by band %v, a pass gives %v", step, m.recent.idle, idle)
	}
	if abs(w-m.recent.weight) > 1e-9 {
		t.Fatalf("step %d: kept recent weight %v, a pass gives %v", step, m.recent.weight, w)
	}
	if len(classes) != len(m.recent.classes) {
		t.Fatalf("step %d: kept %d weight classes, a pass gives %d", step, len(m.recent.classes), len(classes))
	}
	for cw, busy := range classes {
		c := m.recent.classes[cw]
		n := 0
		for b, k := range busy {
			n += k
			if c == nil || c.busy[b] != k {
				t.Fatalf("step %d: weight %v %+v: kept %v, a pass gives %d", step, cw, b, c, k)
			}
		}
		if c.n != n {
			t.Fatalf("step %d: weight %v: kept %d flows, a pass gives %d", step, cw, c.n, n)
		}
	}
}

// TestRecentSumsFollowEveryChange drives the scheduler through a random
// sequence of every call, with time moving on, and checks the recent sums
// the room decision reads against a pass over the flows after each.
func TestRecentSumsFollowEveryChange(t *testing.T) {
	s := New(0)
	r := rand.New(rand.NewPCG(3, 4))
	weights := []float64{0.5, 1, 2, 4}
	now := t0
	for i := range 20000 {
		now = now.Add(time.Duration(r.IntN(60)) * time.Millisecond)
		k := key(fmt.Sprint("t", r.IntN(40)))
		switch r.IntN(10) {
		case 0:
			s.Join(k, r.IntN(NumBands), weights[r.IntN(len(weights))], now)
		case 1:
			s.Rejoin(k)
		case 2:
			s.Leave(k)
		case 3:
			if s.Grant(k) {
				s.Hold(k, r.IntN(NumBands), weights[r.IntN(len(weights))], now)
			}
		case 4:
			s.Done(k, now)
		case 5:
			s.Idle(k)
		case 6:
			s.Start(k, 1, now)
		case 7:
			s.Unhold(k, now)
		case 8:
			s.Access(k, 1, 0, 8, 0, now)
		case 9:
			s.ActiveAbove(k, NumBands-1, now)
		}
		if m := modelOf(s, "m"); m != nil {
			m.mu.Lock()
			m.expire(m.clock)
			checkRecent(t, i, s, m)
			m.mu.Unlock()
		}
	}
}

// Ten thousand buckets that each ran a request and went idle are
// forgotten once DefaultForgetAfter has passed, whatever their counters:
// the scheduler's memory is bounded by the buckets recently active.
func TestIdleFlowsAreForgotten(t *testing.T) {
	s := New(0)
	for i := range 10000 {
		k := key(fmt.Sprint("t", i))
		s.Join(k, 1, 1, t0)
		s.Grant(k)
		s.Start(k, float64(1+i%7), t0) // counters above the floor, most of them
		s.Done(k, t0)
		s.Idle(k)
	}
	if n := len(flows(s)); n != 10000 {
		t.Fatalf("%d flows kept while recent, want 10000", n)
	}
	s.Join(key("later"), 1, 1, t0.Add(DefaultForgetAfter+DefaultActiveWindow))
	s.Models(t0.Add(DefaultForgetAfter + DefaultActiveWindow))
	if n := len(flows(s)); n != 1 {
		t.Fatalf("%d flows kept after they were idle for %v, want only the new one", n, DefaultForgetAfter)
	}
}
