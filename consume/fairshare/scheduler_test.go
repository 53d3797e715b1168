package fairshare

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func key(tenant string) policy.Key { return policy.Key{Tenant: tenant, Model: "m"} }

// serve plays a saturated pool with one slot: the best waiting bucket is
// granted, served `tokens` (prompt only, for simplicity) and rejoins, n
// times. It returns the tenants in grant order.
func serve(s *Scheduler, n int, tokens map[string]float64, band map[string]int, weight map[string]float64) string {
	var order []string
	now := t0
	for range n {
		k, ok := s.Best([]string{"m"})
		if !ok {
			break
		}
		s.Grant(k)
		s.Start(k, tokens[k.Tenant], now)
		s.Done(k, t0)
		order = append(order, k.Tenant)
		now = now.Add(time.Millisecond)
		b := 1 // normal, unless the case says otherwise
		if band != nil {
			b = band[k.Tenant]
		}
		s.Join(k, b, weight[k.Tenant], now)
	}
	return strings.Join(order, " ")
}

func TestGrantOrderEqualBucketsAlternate(t *testing.T) {
	s := New(0)
	s.Join(key("a"), 1, 1, t0)
	s.Join(key("b"), 1, 1, t0)
	got := serve(s, 6, map[string]float64{"a": 10, "b": 10}, nil, nil)
	if want := "a b a b a b"; got != want {
		t.Fatalf("grant order = %q, want %q", got, want)
	}
}

func TestGrantOrderFollowsTokensNotRequests(t *testing.T) {
	// heavy's requests cost 4× light's: light gets four grants per heavy one.
	s := New(0)
	s.Join(key("heavy"), 1, 1, t0)
	s.Join(key("light"), 1, 1, t0)
	got := serve(s, 10, map[string]float64{"heavy": 40, "light": 10}, nil, nil)
	if want := "heavy light light light light heavy light light light light"; got != want {
		t.Fatalf("grant order = %q, want %q", got, want)
	}
}

func TestGrantOrderWeights(t *testing.T) {
	// Weights 1:2:4 with equal requests: per 7 grants, 1, 2 and 4.
	s := New(0)
	w := map[string]float64{"w1": 1, "w2": 2, "w4": 4}
	for _, n := range []string{"w1", "w2", "w4"} {
		s.Join(key(n), 1, w[n], t0)
	}
	got := serve(s, 14, map[string]float64{"w1": 8, "w2": 8, "w4": 8}, nil, w)
	count := map[string]int{}
	for _, n := range strings.Fields(got) {
		count[n]++
	}
	if count["w1"] != 2 || count["w2"] != 4 || count["w4"] != 8 {
		t.Fatalf("grants = %v from %q, want w1:2 w2:4 w4:8", count, got)
	}
}

func TestBandsAreStrict(t *testing.T) {
	s := New(0)
	s.Join(key("low"), 2, 1, t0)
	s.Join(key("normal"), 1, 1, t0)
	s.Join(key("high"), 0, 1, t0)
	band := map[string]int{"low": 2, "normal": 1, "high": 0}
	// high always rejoins, so it takes every grant; the others wait.
	got := serve(s, 4, map[string]float64{"high": 1000, "normal": 1, "low": 1}, band, nil)
	if want := "high high high high"; got != want {
		t.Fatalf("grant order = %q, want %q", got, want)
	}
	s.Leave(key("high"))
	if k, _ := s.Best([]string{"m"}); k.Tenant != "normal" {
		t.Fatalf("after high left, best = %v, want normal", k)
	}
}

func TestJoinLiftsToTheBandsVirtualTime(t *testing.T) {
	s := New(0)
	s.Join(key("a"), 1, 1, t0)
	s.Join(key("b"), 1, 1, t0)
	serve(s, 20, map[string]float64{"a": 100, "b": 100}, nil, nil) // both at 1000; the last grant was at 900
	// A newcomer with a zero counter starts at the band's virtual time,
	// the counter of the last bucket granted (900), not at zero: it is
	// served next, but it does not get the next ten grants in a row.
	s.Join(key("new"), 1, 1, t0)
	if st, _ := s.Flow(key("new"), t0); st.Counter != 900 {
		t.Fatalf("newcomer counter = %v, want 900", st.Counter)
	}
	got := serve(s, 6, map[string]float64{"a": 100, "b": 100, "new": 100}, nil, nil)
	if want := "new a b new a b"; got != want {
		t.Fatalf("grants after the join = %q, want %q", got, want)
	}
}

func TestLeaveAndReturnBanksNothing(t *testing.T) {
	s := New(0)
	s.Join(key("a"), 1, 1, t0)
	s.Join(key("b"), 1, 1, t0)
	serve(s, 2, map[string]float64{"a": 10, "b": 10}, nil, nil)
	s.Leave(key("b")) // b goes idle while a is served alone
	s.Idle(key("b"))
	serve(s, 10, map[string]float64{"a": 10}, nil, nil)
	s.Join(key("b"), 1, 1, t0) // b returns: lifted to a's counter
	got := serve(s, 4, map[string]float64{"a": 10, "b": 10}, nil, nil)
	if want := "a b a b"; got != want && got != "b a b a" {
		t.Fatalf("grant order after b returned = %q, want alternation", got)
	}
}

func TestChargeWhileWaitingReorders(t *testing.T) {
	// A bucket with requests running keeps being charged while its next
	// request waits: its place in the wait set must follow.
	s := New(0)
	s.Join(key("a"), 1, 1, t0)
	s.Join(key("b"), 1, 1, t0)
	s.Start(key("a"), 0, t0)
	s.Charge(key("a"), 50, t0) // a's running request streams 25 tokens (w = 2)
	if k, _ := s.Best([]string{"m"}); k.Tenant != "b" {
		t.Fatalf("best = %v, want b (a was charged while waiting)", k)
	}
}

func TestJainIndex(t *testing.T) {
	for _, tc := range []struct {
		service []float64
		want    float64
	}{
		{[]float64{10, 10, 10}, 1},
		{[]float64{30, 0.0001, 0.0001}, 1.0 / 3},
		{[]float64{10, 20}, 0.9},
	} {
		s := New(time.Hour)
		for i, x := range tc.service {
			k := key(fmt.Sprint("t", i))
			s.Join(k, 1, 1, t0)
			s.Grant(k)
			s.Start(k, x, t0)
		}
		ms := s.Models(t0)
		if len(ms) != 1 || math.Abs(ms[0].Jain-tc.want) > 1e-3 || ms[0].Competing != len(tc.service) {
			t.Errorf("service %v: Jain = %+v, want %.4f over %d", tc.service, ms, tc.want, len(tc.service))
		}
	}
}

func TestForgetsIdleFlows(t *testing.T) {
	s := New(0)
	s.Join(key("a"), 1, 1, t0)
	s.Grant(key("a"))
	s.Start(key("a"), 10, t0)
	s.Done(key("a"), t0)
	s.Idle(key("a"))
	// a's counter (10) equals the floor it set when granted... plus the
	// prompt charged after the grant, so it is above the floor: kept.
	if _, ok := s.Flow(key("a"), t0); !ok {
		t.Fatal("a bucket served more than its band's floor was forgotten: it would bank service")
	}
	s.Join(key("b"), 1, 1, t0)
	s.Grant(key("b")) // floor rises to b's lifted counter (10)
	s.Start(key("b"), 0, t0)
	s.Done(key("b"), t0)
	s.Idle(key("b"))
	if _, ok := s.Flow(key("b"), t0); !ok {
		t.Fatal("a bucket seen just now was forgotten: the room it is owed while it pauses would be lost")
	}
	s.Models(t0.Add(DefaultActiveWindow)) // a pass over the flows, once b is no longer recent
	if _, ok := s.Flow(key("b"), t0); ok {
		t.Fatal("an idle bucket at its band's floor, not seen for the active window, is still held")
	}
}

func BenchmarkGrant10kWaiting(b *testing.B) {
	s := New(0)
	for i := range 10000 {
		s.Join(policy.Key{Tenant: fmt.Sprint("t", i), Model: "m"}, 1, 1, t0)
	}
	models := []string{"m"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		k, _ := s.Best(models)
		s.Grant(k)
		s.Start(k, 100, t0)
		s.Done(k, t0)
		s.Join(k, 1, 1, t0)
	}
}

// TestGrantHoldIsGrantThenHold: the one-lock call leaves the scheduler as
// the two calls do, and refuses a bucket that is not waiting.
func TestGrantHoldIsGrantThenHold(t *testing.T) {
	setup := func() *Scheduler {
		s := New(0)
		a := key("a")
		s.Join(a, 1, 1, t0)
		s.Grant(a)
		s.Start(a, 100, t0) // a's recent cost: what a hold charges
		s.Done(a, t0)
		s.Join(a, 1, 1, t0)
		return s
	}
	one, two := setup(), setup()
	if !one.GrantHold(key("a"), t0) {
		t.Fatal("GrantHold refused a waiting bucket")
	}
	two.Grant(key("a"))
	two.Hold(key("a"), 1, 1, t0)
	got, _ := one.Flow(key("a"), t0)
	want, _ := two.Flow(key("a"), t0)
	if got != want {
		t.Fatalf("after GrantHold %+v, after Grant and Hold %+v", got, want)
	}
	if got.Counter != 200 || got.Waiting {
		t.Fatalf("counter %v waiting %v, want 200 (its start and its hold) and not waiting", got.Counter, got.Waiting)
	}
	if one.GrantHold(key("a"), t0) {
		t.Fatal("GrantHold granted a bucket that no longer waits")
	}
}

// TestWaitingFollowsTheWaitSets: Waiting, which takes no lock, answers
// as the wait sets stand after each change: a join, a rejoin, a grant and
// a leave, in two bands.
func TestWaitingFollowsTheWaitSets(t *testing.T) {
	s := New(0)
	a, b := key("a"), key("b")
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"nothing yet", func() {}, false},
		{"a joins band 0", func() { s.Join(a, 0, 1, t0) }, true},
		{"b joins band 1", func() { s.Join(b, 1, 1, t0) }, true},
		{"a is granted", func() { s.Grant(a) }, true},
		{"b leaves", func() { s.Leave(b) }, false},
		{"b rejoins", func() { s.Rejoin(b) }, true},
		{"b is granted with a hold", func() { s.GrantHold(b, t0) }, false},
		{"a leaves, not waiting", func() { s.Leave(a) }, false},
	}
	for _, st := range steps {
		st.do()
		if got := s.Waiting("m"); got != st.want {
			t.Fatalf("after %s: Waiting = %v, want %v", st.name, got, st.want)
		}
	}
	if s.Waiting("other") {
		t.Fatal("Waiting true for a model never seen")
	}
}

// TestStartCostingChargesWhatCostReturns: the cost is worked out from
// the bucket's recent mean of completion tokens, and a Start charged so
// leaves the flow as Start with that cost does.
func TestStartCostingChargesWhatCostReturns(t *testing.T) {
	setup := func() *Scheduler {
		s := New(0)
		s.Start(key("a"), 10, t0)
		s.Completed(key("a"), 30)
		s.Done(key("a"), t0)
		return s
	}
	one, two := setup(), setup()
	var seen float64
	var had bool
	charged := one.StartCosting(key("a"), false, func(mean float64, ok bool) float64 {
		seen, had = mean, ok
		return 5 + 2*mean
	}, t0)
	if seen != 30 || !had || charged != 65 {
		t.Fatalf("cost saw mean %v (%v) and charged %v, want 30 (true) and 65", seen, had, charged)
	}
	two.Start(key("a"), 65, t0)
	got, _ := one.Flow(key("a"), t0)
	want, _ := two.Flow(key("a"), t0)
	if got != want {
		t.Fatalf("after StartCosting %+v, after Start %+v", got, want)
	}
	one.StartCosting(key("new"), false, func(mean float64, ok bool) float64 {
		seen, had = mean, ok
		return 1
	}, t0)
	if had {
		t.Fatalf("a new bucket's mean reported as known (%v)", seen)
	}
}

// TestStartCostingEmptiedIsIdle: a start that empties its bucket's queue
// makes the bucket's next Join a return from idleness, lifted to its
// band's virtual time, as Idle does. A start that does not, or one whose
// bucket joined again before it (a request of it came and waits), leaves
// the bucket backlogged: not lifted.
func TestStartCostingEmptiedIsIdle(t *testing.T) {
	for _, tc := range []struct {
		name              string
		emptied, rejoined bool
		want              float64
	}{
		{"emptied", true, false, 400},
		{"not emptied", false, false, 10},
		{"emptied, joined again before the start", true, true, 10},
	} {
		s := New(0)
		a, b := key("a"), key("b")
		s.Join(a, 1, 1, t0)
		s.Join(b, 1, 1, t0)
		s.Grant(b)
		if tc.rejoined {
			s.Join(b, 1, 1, t0)
		}
		s.StartCosting(b, tc.emptied, func(float64, bool) float64 { return 10 }, t0)
		s.Done(b, t0)
		s.Leave(b) // its waiting request, if any, went away
		// a alone: the band's virtual time moves to 400, the counter of
		// its last grant.
		serve(s, 5, map[string]float64{"a": 100}, nil, nil)
		s.Join(b, 1, 1, t0)
		if st, _ := s.Flow(b, t0); st.Counter != tc.want {
			t.Errorf("%s: b's counter on its return = %v, want %v", tc.name, st.Counter, tc.want)
		}
	}
}
