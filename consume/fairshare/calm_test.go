package fairshare

import (
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// A band is active above a bucket while one of its buckets waits or
// runs, and for DefaultActiveWindow after its last join, start or end;
// meanwhile the request its client ran and is between counts as idle.
func TestActiveAboveFollowsTheHigherBands(t *testing.T) {
	s := New(0)
	hi, norm, lo := key("hi"), key("norm"), key("lo")
	check := func(step string, k string, band int, at time.Time, want uint8, wantIdle ...int) {
		t.Helper()
		a := s.ActiveAbove(key(k), band, at)
		if a.Active != want || len(wantIdle) > 0 && a.Idle[0] != wantIdle[0] {
			t.Errorf("%s: ActiveAbove(%s, band %d) = %+v; want active %03b, high idle %v", step, k, band, a, want, wantIdle)
		}
	}
	check("nothing yet", "lo", 2, t0, 0)
	s.Join(lo, 2, 1, t0)
	s.Join(norm, 1, 1, t0)
	check("normal waits", "lo", -1, t0, 0b010)
	check("the high band has nothing above it", "hi", 0, t0, 0)
	s.Join(hi, 0, 1, t0)
	check("high and normal wait", "lo", -1, t0, 0b011)
	check("above normal", "norm", -1, t0, 0b001)
	check("a bucket not yet seen is normal", "new", -1, t0, 0b001)

	s.Leave(norm)
	s.Idle(norm)
	s.Grant(hi)
	s.Start(hi, 10, t0)
	later := t0.Add(time.Minute)
	check("high runs a long request", "lo", 2, later, 0b001, 0)
	if a := s.ActiveAbove(lo, 2, later); a.Busy != 1 {
		t.Errorf("busy with high's request running: %d, want 1", a.Busy)
	}
	if a := s.ActiveAbove(policy.Key{Tenant: "lo", Model: "other"}, 2, later); a != (Above{}) {
		t.Errorf("another model's bands: ActiveAbove = %+v, want nothing", a)
	}
	s.Done(hi, later)
	check("its client is between two requests", "lo", 2, later.Add(DefaultActiveWindow-time.Nanosecond), 0b001, 1)
	check("it has gone", "lo", 2, later.Add(DefaultActiveWindow), 0, 0)
}
