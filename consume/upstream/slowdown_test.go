package upstream

import (
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// feed gives s readings in which the server ran batch requests for
// tokens tokens, each step taking itl seconds.
func feed(s *slowdown, g *vllmmetrics.Gauges, batch int, itl float64, tokens float64) {
	g.Running = float64(batch)
	g.ITLTokens += tokens
	g.ITLSeconds += tokens * itl
	s.observe(*g)
}

// A server whose steps grow linearly with its batch, as the simulator's
// --time-factor-under-load 2 over 10 sequences makes them (5 ms alone,
// 10 ms full): the fit finds the line, and the batch within a factor of
// a smaller one: within 1.25 of a batch of 2 (5.56 ms) is 4 (6.67 ms).
func TestSlowdownFitsTheLineOfTheBatch(t *testing.T) {
	var s slowdown
	var g vllmmetrics.Gauges
	itl := func(n int) float64 { return 0.005 * (1 + float64(n-1)/9) }
	feed(&s, &g, 2, itl(2), 0) // the first reading is the reference
	if s.batchWithin(1.25, 1) != 0 {
		t.Fatal("a bound before any sample")
	}
	for _, n := range []int{2, 2, 3, 10, 10, 9} {
		feed(&s, &g, n, itl(n), 100)
	}
	for _, tc := range []struct {
		factor float64
		from   int
		want   int
	}{{1.25, 1, 3}, {1.5, 1, 5}, {2, 1, 10}, {1, 1, 1}, {3, 1, 19}, {1.25, 0, 3},
		{1.25, 2, 4}, {1.25, 4, 7}, {1, 4, 4}} {
		if got := s.batchWithin(tc.factor, tc.from); got != tc.want {
			t.Errorf("batchWithin(%v, from %d) = %d, want %d (fit: %v s at one, +%v s a request)", tc.factor, tc.from, got, tc.want, s.base, s.perRequest)
		}
	}
}

// No bound from what cannot tell: one batch size, batches one apart, a
// flat line (memory-bound decoding), too few tokens, a restart.
func TestSlowdownSetsNoBoundWithoutEvidence(t *testing.T) {
	cases := map[string]func(*slowdown, *vllmmetrics.Gauges){
		"one batch": func(s *slowdown, g *vllmmetrics.Gauges) {
			feed(s, g, 4, 0.01, 100)
			feed(s, g, 4, 0.01, 100)
		},
		"batches one apart": func(s *slowdown, g *vllmmetrics.Gauges) {
			feed(s, g, 4, 0.01, 100)
			feed(s, g, 5, 0.02, 100)
		},
		"flat": func(s *slowdown, g *vllmmetrics.Gauges) {
			feed(s, g, 1, 0.01, 100)
			feed(s, g, 30, 0.01, 100)
		},
		"too few tokens": func(s *slowdown, g *vllmmetrics.Gauges) {
			feed(s, g, 1, 0.01, slowdownMinTokens-1)
			g.ITLTokens, g.ITLSeconds = 0, 0 // restarted: counts from here
			feed(s, g, 10, 0.02, 0)
			feed(s, g, 1, 0.01, slowdownMinTokens-1)
		},
		"an idle server": func(s *slowdown, g *vllmmetrics.Gauges) {
			feed(s, g, 0, 0.01, 100)
			feed(s, g, 0, 0.02, 100)
		},
	}
	for name, run := range cases {
		var s slowdown
		var g vllmmetrics.Gauges
		feed(&s, &g, 1, 0, 0)
		run(&s, &g)
		if got := s.batchWithin(1.25, 1); got != 0 {
			t.Errorf("%s: batchWithin(1.25) = %d, want 0 (no bound)", name, got)
		}
	}
}

// Too few tokens in one interval are added to the next: the sample
// spans both readings.
func TestSlowdownAddsUpShortIntervals(t *testing.T) {
	var s slowdown
	var g vllmmetrics.Gauges
	feed(&s, &g, 1, 0, 0)
	feed(&s, &g, 1, 0.010, 10)
	feed(&s, &g, 1, 0.010, 10) // 20 tokens since the reference, batch 1
	feed(&s, &g, 7, 0.016, 100)
	if len(s.byBatch) != 4 || s.byBatch[0].samples != 1 || s.byBatch[0].itl != 0.010 || s.byBatch[3].samples != 1 {
		t.Fatalf("byBatch = %+v, want one sample at 1 (10 ms) and one at 4 (the mean of 1 and 7)", s.byBatch)
	}
}

// The pool learns from the simulator's own /metrics how much its batch
// slows it (--time-factor-under-load 2 over 10 sequences: ITL 5 ms
// alone, 10 ms full) and keeps a band's batch within 1.25 times its speed
// alone: 3 requests beside a band of one, 4 beside a band of 2; the
// learned limit (8) with no bound.
func TestPoolLearnsHowItsServerSlows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := vllmsim.New(vllmsim.Config{Models: []string{"m"}, MaxNumSeqs: 10, TTFT: 20 * time.Millisecond,
			ITL: 5 * time.Millisecond, TimeFactorUnderLoad: 2})
		p, err := NewPool(Config{Upstreams: []UpstreamConfig{{URL: "http://up", Models: []string{"m"}}}, Transport: inProcess{sim}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{2, 10} { // clients not behind the pool: the server's batch is what counts
			var wg sync.WaitGroup
			end := time.Now().Add(2 * time.Second)
			for range batch {
				wg.Go(func() {
					for time.Now().Before(end) {
						req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"model":"m","prompt":"a","max_tokens":40}`))
						req.Header.Set("Content-Type", "application/json")
						rec := httptest.NewRecorder()
						if sim.ServeHTTP(rec, req); rec.Code != 200 {
							t.Errorf("the simulator answered %d: %s", rec.Code, rec.Body)
							return
						}
					}
				})
			}
			wg.Wait()
		}
		for _, tc := range []struct {
			factor    float64
			own, want int
		}{{1.25, 0, 3}, {1.25, 1, 3}, {1.25, 2, 4}, {math.Inf(1), 2, learnStart}} {
			if running, calm := p.Calm("m", tc.factor, tc.own); running != 0 || calm != tc.want {
				t.Errorf("Calm(%v, own %d) = %d running, %d calm; want 0, %d", tc.factor, tc.own, running, calm, tc.want)
			}
		}
		st := p.Stats()[0]
		if math.Abs(st.StepSeconds-0.005) > 0.0005 || math.Abs(st.StepGrowth-1.0/9) > 0.01 {
			t.Errorf("fitted %v s alone, +%v a request; want 0.005 s, +0.111", st.StepSeconds, st.StepGrowth)
		}
		if _, calm := p.Calm("other", 1.25, 2); calm != 0 {
			t.Errorf("Calm of a model no upstream serves = %d, want 0", calm)
		}
	})
}
