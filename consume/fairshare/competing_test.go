package fairshare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// competingByPass is competing the slow way: a pass over m's flows.
func competingByPass(m *model, now int64) (total, squares float64, n int) {
	horizon := now - int64(m.s.halfLife*1e9)
	for _, f := range m.flows {
		if f.waitedAt == 0 || f.waitedAt < horizon {
			continue
		}
		x := f.decayedTo(now, m.s.halfLife)
		total += x
		squares += x * x
		n++
	}
	return total, squares, n
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b), 1) }

// TestCompetingSumsFollowEveryChange drives the scheduler through a
// random sequence of joins, polls, charges, ends and idle periods, with
// time going forward by random steps (some past the half-life and the
// forget delay), and checks the kept sums against a pass over the flows
// after each step.
func TestCompetingSumsFollowEveryChange(t *testing.T) {
	s := New(2 * time.Second)
	r := rand.New(rand.NewPCG(3, 4))
	now := t0
	for i := range 20000 {
		k := key(fmt.Sprint("t", r.IntN(40)))
		switch r.IntN(8) {
		case 0, 1:
			s.Join(k, 1, float64(1+r.IntN(4)), now)
		case 2:
			s.Compete(k, 1, now)
		case 3:
			if s.Grant(k) {
				s.Start(k, float64(r.IntN(500)), now)
			}
		case 4:
			s.Charge(k, float64(r.IntN(200)-50), now)
		case 5:
			s.Done(k, now)
		case 6:
			s.Leave(k)
			s.Idle(k)
		case 7:
			s.Models(now) // expires and forgets
		}
		steps := []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second, 70 * time.Second}
		now = now.Add(steps[r.IntN(len(steps))] * time.Duration(r.IntN(2)))
		m := modelOf(s, "m")
		if m == nil {
			continue
		}
		m.mu.Lock()
		gt, gs, gn := m.competing(now.UnixNano())
		wt, ws, wn := competingByPass(m, now.UnixNano())
		m.mu.Unlock()
		if gn != wn || !near(gt, wt) || !near(gs, ws) {
			t.Fatalf("step %d: kept sums %v, %v over %d; a pass gives %v, %v over %d", i, gt, gs, gn, wt, ws, wn)
		}
	}
}
