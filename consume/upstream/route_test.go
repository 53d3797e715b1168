package upstream

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream/prefix"
	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
	"github.com/pacegate/pacegate/policy"
)

// routePool is a pool of n upstreams serving "m" that are never called:
// the routing tests only move slots between them.
func routePool(t *testing.T, n, maxConc int, cacheTokens int64) *Pool {
	t.Helper()
	ups := make([]UpstreamConfig, n)
	for i := range ups {
		ups[i] = UpstreamConfig{URL: fmt.Sprintf("http://u%d.invalid", i), MaxConcurrency: maxConc, Models: []string{"m"}, CacheTokens: cacheTokens}
	}
	return newPool(t, ups...)
}

// setLoad sets each upstream's requests in flight, as they have been
// for a long while (their recent load too).
func (p *Pool) setLoad(inFlight ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := loadClock(time.Now())
	p.all.inFlight = 0
	for i, u := range p.ups {
		if i < len(inFlight) {
			u.inFlight = inFlight[i]
			u.load = recentLoad{mean: float64(u.inFlight), since: now}
		}
		p.all.inFlight += u.inFlight
	}
	p.all.load = recentLoad{mean: float64(p.all.inFlight), since: now}
}

// burst changes upstream i's requests in flight by n now: its recent
// load does not move yet.
func (p *Pool) burst(i, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(p.ups[i], n, time.Now())
}

func (p *Pool) loads() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, len(p.ups))
	for i, u := range p.ups {
		out[i] = u.inFlight
	}
	return out
}

// blocks is a prompt of the given literal block hashes.
func blocks(hs ...uint64) *consume.Request {
	return &consume.Request{ID: "r", Key: policy.Key{Tenant: "t", Model: "m"}, Prefix: hs, PromptBytes: len(hs) * prefix.BlockBytes}
}

// routeFrom routes req holding a slot on upstream from (counted in its
// load already) and reports where it went and the decision counted.
func routeFrom(p *Pool, from int, req *consume.Request) (to int, decision string, matched int) {
	s := &slot{p: p, u: p.ups[from]}
	before := p.Stats()
	p.route(s, req)
	p.record(s.u.id, req)
	after := p.Stats()[s.u.id]
	for _, d := range []string{DecisionPrefix, DecisionMiss, DecisionLoad} {
		if after.Routed[d] > before[s.u.id].Routed[d] {
			decision = d
		}
	}
	return s.u.id, decision, s.matched
}

func TestRouteChoices(t *testing.T) {
	steps := []struct {
		name     string
		load     []int // in flight, the routed request's slot included (on from)
		from     int
		req      *consume.Request
		to       int
		decision string
		matched  int
	}{
		{"the longest prefix wins", []int{0, 0, 1}, 2, blocks(1, 2, 3, 4, 9), 0, DecisionPrefix, 4},
		{"a tie goes to the least loaded", []int{2, 1, 1}, 2, blocks(1, 2, 7), 1, DecisionPrefix, 2},
		{"over the load bound: the next best", []int{5, 1, 1}, 2, blocks(1, 2, 3, 4), 1, DecisionLoad, 2},
		{"a miss goes to the least loaded", []int{1, 0, 2}, 2, blocks(7, 8), 1, DecisionMiss, 0},
		{"a miss stays where it is when that is least loaded", []int{1, 1, 1}, 2, blocks(7, 8), 2, DecisionMiss, 0},
	}
	for _, s := range steps {
		p := routePool(t, 3, 8, 1<<20)
		p.record(0, blocks(1, 2, 3, 4))
		p.record(1, blocks(1, 2, 5, 6))
		p.setLoad(s.load...)
		to, decision, matched := routeFrom(p, s.from, s.req)
		if to != s.to || decision != s.decision || matched != s.matched {
			t.Errorf("%s: went to %d (%s, %d blocks), want %d (%s, %d)", s.name, to, decision, matched, s.to, s.decision, s.matched)
		}
		want := append([]int(nil), s.load...)
		want[s.from]--
		want[s.to]++
		if got := p.loads(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: loads %v, want %v (the slot moves with the request)", s.name, got, want)
		}
	}
}

func chainOf(r *consume.Request) *prefix.Chain {
	return &prefix.Chain{Hashes: r.Prefix, Bytes: r.PromptBytes}
}

func TestRouteSkipsAnUpstreamAtItsLimit(t *testing.T) {
	p := routePool(t, 2, 2, 1<<20)
	p.record(0, blocks(1, 2))
	p.setLoad(2, 1)
	if to, d, _ := routeFrom(p, 1, blocks(1, 2, 3)); to != 1 || d != DecisionLoad {
		t.Fatalf("went to %d (%s); want 1 (load): upstream 0 is at its max_concurrency", to, d)
	}
}

// learnedAt makes every upstream of p read its metrics with its learned
// limit at limit.
func (p *Pool) learnedAt(limit int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range p.ups {
		u.metricsOK, u.learn.limit = true, limit
	}
}

func TestRouteTakesTheHolderPastItsLearnedLimit(t *testing.T) {
	cases := []struct {
		name     string
		maxConc  int // 0: no hard cap
		to       int
		decision string
	}{
		{"learned limit only: the holder takes it, within the load bound", 0, 0, DecisionPrefix},
		{"max_concurrency is a hard cap: the next best", 2, 2, DecisionLoad},
	}
	for _, c := range cases {
		p := routePool(t, 3, c.maxConc, 1<<20)
		p.learnedAt(2)
		p.record(0, blocks(1, 2, 3))
		// 5 in flight over 3: the bound is 1.25 × 5/3 + 1 = 3.08, so
		// upstream 0 may run a third; its learned limit is 2.
		p.setLoad(2, 2, 1)
		if to, d, _ := routeFrom(p, 2, blocks(1, 2, 3, 4)); to != c.to || d != c.decision {
			t.Errorf("%s: went to %d (%s), want %d (%s)", c.name, to, d, c.to, c.decision)
		}
	}
}

func TestRouteKeepsOthersWithinTheirLearnedLimits(t *testing.T) {
	p := routePool(t, 2, 0, 1<<20)
	p.learnedAt(8)
	p.mu.Lock()
	p.ups[0].learn.limit = 2
	p.mu.Unlock()
	p.record(0, blocks(1, 2))
	// Upstream 0 runs 2 of its learned 2, upstream 1 runs 3 besides the
	// routed request: by load 0 is better, but only a holder may pass
	// its learned limit.
	p.setLoad(2, 4)
	if to, d, _ := routeFrom(p, 1, blocks(7, 8)); to != 1 || d != DecisionMiss {
		t.Fatalf("a miss went to %d (%s); want 1 (miss)", to, d)
	}
	p.setLoad(2, 4)
	if to, d, _ := routeFrom(p, 1, blocks(1, 2, 7)); to != 0 || d != DecisionPrefix {
		t.Fatalf("a follow-up went to %d (%s); want 0 (prefix)", to, d)
	}
}

// holderPool is four upstreams that learned a limit of 10, upstream 0
// holding the prompt of blocks 1, 2, 3.
func holderPool(t *testing.T) *Pool {
	t.Helper()
	p := routePool(t, 4, 0, 1<<20)
	p.learnedAt(10)
	p.record(0, blocks(1, 2, 3))
	return p
}

// TestRouteBoundsTheRecentLoadByTheMeanRecentLoad: a pool quieter for a
// moment than over the last second keeps a conversation where it is.
func TestRouteBoundsTheRecentLoadByTheMeanRecentLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holderPool(t)
		p.setLoad(5, 5, 5, 5)
		for i, n := range []int{-1, -4, -4, -3} {
			p.burst(i, n)
		}
		// In flight 4, 1, 1 and 2: upstream 0's recent load 5 is over
		// 1.25 × 2 + 1, but not over 1.25 × 5 + 1.
		if to, d, _ := routeFrom(p, 3, blocks(1, 2, 3, 4)); to != 0 || d != DecisionPrefix {
			t.Fatalf("went to %d (%s); want 0 (prefix): it runs no more than the others have", to, d)
		}
	})
}

// TestRouteBoundsTheRecentLoad: within its learned limit a holder is
// bounded by its recent load, not by a moment's requests in flight.
func TestRouteBoundsTheRecentLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holderPool(t)
		// Upstream 0 has run 2 like the others, and 6 of its turns have
		// just started: in flight 6 is over 1.25 × 3 + 1, its recent
		// load 2 is not.
		p.setLoad(2, 2, 2, 3)
		p.burst(0, 4)
		if to, d, _ := routeFrom(p, 3, blocks(1, 2, 3, 4)); to != 0 || d != DecisionPrefix {
			t.Fatalf("a turn of a conversation went to %d (%s); want 0 (prefix): its replica is busy for a moment", to, d)
		}
		// Six seconds later the 6 still run there: a hot spot.
		time.Sleep(6 * time.Second)
		p.burst(3, 1) // the next request's slot
		if to, d, _ := routeFrom(p, 3, blocks(1, 2, 3, 5)); to != 3 || d != DecisionLoad {
			t.Fatalf("went to %d (%s); want 3 (load): upstream 0 has run 6 against a mean of 3.25 for seconds", to, d)
		}
	})
}

// TestRouteBoundsASharedPrefixByInFlight: a prefix two upstreams hold is
// no conversation's own: the bound is on the moment's requests in flight,
// which spreads a preamble over the pool.
func TestRouteBoundsASharedPrefixByInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := routePool(t, 3, 0, 1<<20)
		p.learnedAt(10)
		p.record(0, blocks(1, 2, 3))
		p.record(1, blocks(1, 2, 3))
		p.setLoad(2, 2, 2)
		p.burst(0, 4)
		p.burst(1, 4)
		// 6, 6 and 2 in flight: the bound is 1.25 × 14/3 + 1 = 6.83.
		if to, d, _ := routeFrom(p, 2, blocks(1, 2, 3, 9)); to != 2 || d != DecisionLoad {
			t.Fatalf("went to %d (%s); want 2 (load): both holders would run a 7th", to, d)
		}
	})
}

// TestRouteSendsAMissWhereTheRecentLoadIsLowest: a new conversation goes
// where fewer conversations have been running, not where fewer run at
// this moment.
func TestRouteSendsAMissWhereTheRecentLoadIsLowest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := routePool(t, 3, 0, 1<<20)
		p.learnedAt(10)
		p.setLoad(1, 3, 5)
		p.burst(0, 2)  // 3 in flight, 1 for a long while
		p.burst(1, -2) // 1 in flight, 3 for a long while
		// 3, 1 and 5 in flight: the bound, 1.25 × 3 + 1, admits either.
		if to, d, _ := routeFrom(p, 2, blocks(7, 8)); to != 0 || d != DecisionMiss {
			t.Fatalf("went to %d (%s); want 0 (miss): upstream 1 runs fewer now, 0 has run fewer", to, d)
		}
	})
}

// TestRouteBoundsAHolderPastItsLimitByInFlight: past its learned limit a
// holder takes a request only within the bound on requests in flight, so
// a burst does not pile up in vLLM's queue before its recent load shows.
func TestRouteBoundsAHolderPastItsLimitByInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := routePool(t, 2, 0, 1<<20)
		p.learnedAt(4)
		p.record(0, blocks(1, 2))
		p.setLoad(1, 1)
		p.burst(0, 4) // 5 in flight, recent load 1
		// 6 in flight over 2: the bound is 1.25 × 3 + 1 = 4.75.
		if to, d, _ := routeFrom(p, 1, blocks(1, 2, 3)); to != 1 || d != DecisionLoad {
			t.Fatalf("went to %d (%s); want 1 (load)", to, d)
		}
	})
}

func TestRouteFollowsTheConversation(t *testing.T) {
	p := routePool(t, 4, 8, 1<<20)
	first, _, _ := routeFrom(p, 3, blocks(10, 11))
	p.setLoad(0, 0, 0, 0)
	// Turn two extends turn one; it starts from another upstream and
	// comes back to the one that prefilled turn one.
	p.setLoad(0, 1, 0, 0)
	if to, d, m := routeFrom(p, 1, blocks(10, 11, 12)); to != first || d != DecisionPrefix || m != 2 {
		t.Fatalf("turn two went to %d (%s, %d); want %d (prefix, 2)", to, d, m, first)
	}
}

func TestRouteDropsAnUpstreamThatGoesDown(t *testing.T) {
	p := routePool(t, 2, 8, 1<<20)
	p.record(0, blocks(1, 2))
	p.markDown(p.ups[0], errors.New("gone"))
	p.setLoad(0, 1)
	if to, d, _ := routeFrom(p, 1, blocks(1, 2)); to != 1 || d != DecisionMiss {
		t.Fatalf("went to %d (%s); want 1 (miss): upstream 0 is down and its blocks forgotten", to, d)
	}
	if st := p.Stats()[0]; st.IndexBlocks != 0 {
		t.Fatalf("down upstream still has %d blocks indexed", st.IndexBlocks)
	}
}

func TestRouteForgetsWhatTheCacheEvicted(t *testing.T) {
	// 16 blocks of cache (the index's minimum): a conversation of 10
	// blocks is evicted by 16 newer blocks routed to the same upstream.
	p := routePool(t, 2, 8, 16*prefix.TokensPerBlock)
	old := make([]uint64, 10)
	for i := range old {
		old[i] = uint64(100 + i)
	}
	p.record(0, blocks(old...))
	newer := make([]uint64, 16)
	for i := range newer {
		newer[i] = uint64(200 + i)
	}
	p.record(0, blocks(newer...))
	p.setLoad(1, 1) // equally loaded: a miss stays where its slot is
	if to, d, _ := routeFrom(p, 1, blocks(old...)); to != 1 || d != DecisionMiss {
		t.Fatalf("went to %d (%s); want 1 (miss): the old conversation left the cache", to, d)
	}
}

func TestLeastOutstandingPolicyHasNoIndex(t *testing.T) {
	p, err := NewPool(Config{Upstreams: []UpstreamConfig{{URL: "http://a.invalid", Models: []string{"m"}}},
		Routing: Routing{Policy: RouteLeastOutstanding}})
	if err != nil {
		t.Fatal(err)
	}
	if p.index != nil {
		t.Fatal("least_outstanding keeps a prefix index")
	}
	for _, bad := range []Routing{{Policy: "random"}, {LoadBound: 0.5}} {
		if _, err := NewPool(Config{Upstreams: []UpstreamConfig{{URL: "http://a.invalid"}}, Routing: bad}); err == nil {
			t.Errorf("NewPool accepted %+v", bad)
		}
	}
}

// BenchmarkRouteDecision is one routing decision with 64 upstreams and
// 100,000 indexed blocks: the index lookup of a 64-block prompt (16 KiB),
// the choice among upstreams with room within the load bound, and moving
// the slot. Recording the prompt afterwards is BenchmarkRouteRecord.
func BenchmarkRouteDecision(b *testing.B) { benchRoute(b, false) }

// BenchmarkRouteRecord is the bookkeeping after a decision: the 64 blocks
// of the prompt touched or added in the chosen upstream's LRU.
func BenchmarkRouteRecord(b *testing.B) { benchRoute(b, true) }

func benchRoute(b *testing.B, record bool) {
	ups := make([]UpstreamConfig, 64)
	for i := range ups {
		ups[i] = UpstreamConfig{URL: fmt.Sprintf("http://u%d.invalid", i), MaxConcurrency: 1 << 20, Models: []string{"m"}, CacheTokens: 1 << 30}
	}
	p, err := NewPool(Config{Upstreams: ups})
	if err != nil {
		b.Fatal(err)
	}
	var n uint64
	convs := make([]*consume.Request, 0, 1563)
	for range 1563 { // 64 blocks each: 100,032 blocks
		hs := make([]uint64, 64)
		for i := range hs {
			n++
			hs[i] = n
		}
		convs = append(convs, blocks(hs...))
		p.record(len(convs)%64, convs[len(convs)-1])
	}
	ones := make([]int, len(p.ups))
	for i := range ones {
		ones[i] = 1
	}
	p.setLoad(ones...)
	s := &slot{p: p, u: p.ups[0]}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := i % len(convs)
		req := convs[j]
		if record { // where it was routed before: its blocks are there
			p.record((j+1)%64, req)
		} else {
			p.route(s, req)
		}
		i++
	}
}

// TestScrapeSizesTheIndexFromTheReportedCache: an upstream's part of the
// index takes the cache size its /metrics report, unless configured.
func TestScrapeSizesTheIndexFromTheReportedCache(t *testing.T) {
	p := newPool(t, UpstreamConfig{URL: "http://a.invalid", Models: []string{"m"}},
		UpstreamConfig{URL: "http://b.invalid", Models: []string{"m"}, CacheTokens: 32 * prefix.TokensPerBlock})
	for _, u := range p.ups {
		p.applyReading(u, vllmmetrics.Reading{CacheTokens: 64 * prefix.TokensPerBlock}, nil)
	}
	if got := []int{p.index.Stat(0).Capacity, p.index.Stat(1).Capacity}; !slices.Equal(got, []int{64, 32}) {
		t.Fatalf("capacities = %v, want [64 32]: the reported size, and the configured one", got)
	}
}

// TestPoolRecentLoadIsTheSumOfTheUpstreams: the pool's recent load,
// kept as one sum, follows the sum of its upstreams' within the decay's
// approximation.
func TestPoolRecentLoadIsTheSumOfTheUpstreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := routePool(t, 3, 0, 1<<20)
		steps := []struct {
			up, n int
			wait  time.Duration
		}{{0, 3, 0}, {1, 2, 300 * time.Millisecond}, {0, -1, 10 * time.Millisecond}, {2, 5, time.Second},
			{1, -2, 2 * time.Millisecond}, {2, -3, 700 * time.Millisecond}, {0, 1, 3 * time.Second}}
		for _, st := range steps {
			time.Sleep(st.wait)
			p.burst(st.up, st.n)
			p.mu.Lock()
			clock := loadClock(time.Now().Add(400 * time.Millisecond))
			var sum float64
			for _, u := range p.ups {
				sum += u.load.at(clock, u.inFlight)
			}
			all := p.recentLoad(p.ups, clock)
			p.mu.Unlock()
			if math.Abs(all-sum) > 0.05*sum {
				t.Fatalf("after %+v: the pool's recent load %.3f, the upstreams' sum %.3f", st, all, sum)
			}
		}
	})
}

// TestRouteSendsANewConversationWhereFewestAreLive: a miss goes to the
// upstream with the fewest conversations still going, before the lowest
// recent load, and then to one where its tenant has a conversation; a
// conversation silent for the window (four mean gaps between turns, at
// least a second) no longer counts.
func TestRouteSendsANewConversationWhereFewestAreLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := routePool(t, 3, 0, 1<<20)
		p.learnedAt(10)
		turn := func(up, conv int) { // a turn of conv on up, as route records it
			p.mu.Lock()
			defer p.mu.Unlock()
			p.live.touch(&p.ups[up].conv, uint64(conv), policy.Key{Tenant: "a", Model: "m"}, loadClock(time.Now()))
		}
		for range 3 { // turns 100 ms apart
			turn(0, 1)
			turn(0, 2)
			turn(1, 3)
			turn(2, 5)
			turn(2, 6)
			time.Sleep(100 * time.Millisecond)
		}
		p.setLoad(2, 2, 1) // 2 has run the least
		if to, d, _ := routeFrom(p, 2, blocks(4, 100)); to != 1 || d != DecisionMiss {
			t.Fatalf("went to %d (%s); want 1 (miss): one conversation is live there, two on 0 and 2", to, d)
		}
		for range 12 { // only 1 and 4 go on
			time.Sleep(100 * time.Millisecond)
			turn(0, 1)
			turn(1, 4)
		}
		p.setLoad(1, 1, 1)
		ofU := func(r *consume.Request) *consume.Request { r.Key.Tenant = "u"; return r }
		if to, d, _ := routeFrom(p, 0, ofU(blocks(7, 100))); to != 2 || d != DecisionMiss {
			t.Fatalf("went to %d (%s); want 2 (miss): its conversations ended over a second ago", to, d)
		}
		// One live conversation on each; tenant u's is on 2.
		p.setLoad(2, 1, 2)
		if to, d, _ := routeFrom(p, 0, ofU(blocks(8, 100))); to != 2 || d != DecisionMiss {
			t.Fatalf("went to %d (%s); want 2 (miss): as many live everywhere, and the tenant's is there", to, d)
		}
	})
}

// A tenant's new conversation takes the place of its only live one with
// the model, which has most probably ended: that one stops counting at
// once, so the replica it was on is where the fewest go on. Its
// conversation with another model stays; a tenant with two live
// conversations keeps both counted; a retired conversation that does go
// on is counted again at its next turn.
func TestRouteANewConversationTakesThePlaceOfTheTenantsLastOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := routePool(t, 2, 0, 1<<20)
		p.learnedAt(10)
		turn := func(up, conv int, tenant string) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.live.touch(&p.ups[up].conv, uint64(conv), policy.Key{Tenant: tenant, Model: "m"}, loadClock(time.Now()))
		}
		counts := func() []int {
			p.mu.Lock()
			defer p.mu.Unlock()
			return []int{p.live.count(&p.ups[0].conv, loadClock(time.Now())), p.live.count(&p.ups[1].conv, loadClock(time.Now()))}
		}
		of := func(tenant string, r *consume.Request) *consume.Request { r.Key.Tenant = tenant; return r }
		turn(0, 1, "a")
		turn(0, 3, "c")
		turn(1, 2, "b")
		p.mu.Lock() // a's conversation with another model, which it keeps
		p.live.touch(&p.ups[1].conv, 9, policy.Key{Tenant: "a", Model: "m2"}, loadClock(time.Now()))
		p.mu.Unlock()
		p.setLoad(0, 1) // 0 has run less: the tie-break once a's is retired
		if to, d, _ := routeFrom(p, 1, of("a", blocks(4, 100))); to != 0 || d != DecisionMiss {
			t.Fatalf("a's new conversation went to %d (%s); want 0 (miss), where its last one was", to, d)
		}
		if got := counts(); !slices.Equal(got, []int{2, 2}) {
			t.Fatalf("live %v after a's new conversation; want [2 2]: 3 and a's new one on 0, 2 and a's with m2 on 1", got)
		}
		turn(1, 5, "c") // c has two now: 3 on 0, 5 on 1
		if to, _, _ := routeFrom(p, 0, of("c", blocks(6, 100))); to != 0 {
			t.Fatalf("c's third conversation went to %d; want 0 (the fewest live)", to)
		}
		if got := counts(); !slices.Equal(got, []int{3, 3}) {
			t.Fatalf("live %v after c's third conversation; want [3 3]: none of c's retired", got)
		}
		turn(1, 2, "b") // b's conversation goes on: no change
		turn(0, 1, "a") // a's first conversation was going on after all
		if got := counts(); !slices.Equal(got, []int{4, 3}) {
			t.Fatalf("live %v after a's first conversation came back; want [4 3]", got)
		}
	})
}
