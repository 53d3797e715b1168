package fairshare

import (
	"slices"
	"testing"
)

// A slot is charged when it is granted: what a request of the bucket has
// recently been charged at its start. So when slots free together, a
// bucket of long requests granted one does not also get the next at the
// same counter; a bucket of requests 8× cheaper gets eight first.
func TestGrantsChargeTheCommitment(t *testing.T) {
	s := New(0)
	long, short := key("long"), key("short")
	// One earlier request each sets what their requests are charged:
	// 1 + 2 × 512 and 1 + 2 × 64 (then given back, so both start at 0).
	for _, c := range []struct {
		k    string
		cost float64
	}{{"long", 1025}, {"short", 129}} {
		s.Start(key(c.k), c.cost, t0)
		s.Charge(key(c.k), -c.cost, t0)
		s.Done(key(c.k), t0)
	}
	s.Join(long, 1, 1, t0)
	s.Join(short, 1, 1, t0)
	var order []string
	for range 10 { // ten slots free at once; both stay backlogged
		k, ok := s.Best([]string{"m"})
		if !ok {
			t.Fatal("no bucket waiting")
		}
		s.Grant(k)
		s.Hold(k, 1, 1, t0)
		s.Rejoin(k)
		order = append(order, k.Tenant)
	}
	want := []string{"long", "short", "short", "short", "short", "short", "short", "short", "short", "long"}
	if !slices.Equal(order, want) {
		t.Fatalf("grant order %v, want %v", order, want)
	}
	// Starting a held slot replaces the hold's charge with the
	// request's own; returning one gives its charge back.
	counter := func(k string) float64 { st, _ := s.Flow(key(k), t0); return st.Counter }
	if got := counter("long"); got != 2050 {
		t.Fatalf("long's counter after two grants %v, want 2050", got)
	}
	s.Start(long, 1+2*100, t0) // this request asks for 100 tokens
	if got := counter("long"); got != 1025+201 {
		t.Fatalf("long's counter after a start %v, want %v", got, 1025+201)
	}
	s.Unhold(long, t0)
	if got := counter("long"); got != 201 {
		t.Fatalf("long's counter after its other hold was returned %v, want 201", got)
	}
}
