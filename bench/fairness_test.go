package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacegate/pacegate/policy/config"
)

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5, 5, 5}, 1},
		{[]float64{1, 0, 0, 0}, 0.25},
		{[]float64{1, 2}, 0.9},          // 9 / (2·5)
		{[]float64{1, 2, 4}, 49.0 / 63}, // 7² / (3·21)
	} {
		if got := jain(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if !math.IsNaN(jain(nil)) || !math.IsNaN(jain([]float64{0, 0})) {
		t.Error("empty or all-zero set: want NaN")
	}
}

func TestShareErrors(t *testing.T) {
	w := []float64{1, 2, 4}
	if got := maxAbs(shareErrors([]float64{10, 20, 40}, w)); got > 1e-12 {
		t.Errorf("served in the weights' ratio: worst error %v, want 0", got)
	}
	// Equal service where 1:2:4 was due: shares 1/3 against 1/7, 2/7, 4/7.
	got := shareErrors([]float64{3, 3, 3}, w)
	want := []float64{7.0/3 - 1, 7.0/6 - 1, 7.0/12 - 1}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("shareErrors[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got := maxAbs(shareErrors([]float64{10.4, 20, 40}, w)); math.Abs(got-0.0342) > 1e-3 {
		t.Errorf("4 %% extra for one tenant: worst error %v, want ≈ 0.034", got)
	}
	if !math.IsNaN(maxAbs(shareErrors([]float64{0, 0, 0}, w))) {
		t.Error("nothing served: want NaN")
	}
}

func TestWindowStats(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w0, w1, stop := at(1000), at(2000), at(2500)
	traces := []streamTrace{
		// Started before the window, two of its three tokens inside it: tokens count, TTFT does not.
		{Start: at(500), Status: 200, TTFT: 450 * time.Millisecond, Chunks: []time.Time{at(950), at(1000), at(1999)}, End: at(1999)},
		// Started inside, first token inside: prompt, tokens and TTFT count; the token after w1 does not.
		{Start: at(1500), Status: 200, TTFT: 100 * time.Millisecond, Chunks: []time.Time{at(1600), at(2000)}, End: at(2000)},
		// Started inside, no first token when the harness cut the load: TTFT is the wait, a lower bound.
		{Start: at(1800), Err: errors.New("context deadline exceeded"), End: at(2600)},
		// A 500 and a stream broken before the stop are errors.
		{Start: at(1200), Status: 500, End: at(1201)},
		{Start: at(1300), Status: 200, TTFT: 10 * time.Millisecond, Chunks: []time.Time{at(1310)}, Err: errors.New("EOF"), End: at(1400)},
		// Started after the window.
		{Start: at(2100), Status: 200, TTFT: 10 * time.Millisecond, Chunks: []time.Time{at(2110)}, End: at(2200)},
	}
	got := windowStats(traces, w0, w1, stop, 3)
	want := tenantWindow{Requests: 2, Completion: 3, Prompt: 3, NoFirst: 1, Errors: 2}
	if got.Requests != want.Requests || got.Completion != want.Completion || got.Prompt != want.Prompt ||
		got.NoFirst != want.NoFirst || got.Errors != want.Errors {
		t.Errorf("windowStats = %+v, want %+v", got, want)
	}
	if len(got.TTFT) != 2 || got.TTFT[0] != 100 || got.TTFT[1] != 800 {
		t.Errorf("TTFT samples = %v, want [100 800]", got.TTFT)
	}
	if s := got.served(2); s != 9 {
		t.Errorf("served = %v, want 3 + 2×3", s)
	}
}

func TestCounterSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pacegate_suspends_total"}, []string{"model", "reason"})
	reg.MustRegister(c)
	c.WithLabelValues("m1", "capacity").Add(3)
	c.WithLabelValues("m2", "capacity").Add(4)
	c.WithLabelValues("m1", "pace").Add(100)
	if got := counterSum(reg, "pacegate_suspends_total", "reason", "capacity"); got != 7 {
		t.Errorf("counterSum = %v, want 7", got)
	}
	if got := counterSum(reg, "pacegate_other_total", "reason", "capacity"); got != 0 {
		t.Errorf("missing counter: %v, want 0", got)
	}
}

func TestFairConfigParses(t *testing.T) {
	tenants := fairCases(time.Second)[3].Tenants // bands: priorities
	tenants = append(tenants, fairCases(time.Second)[2].Tenants...)
	for _, mode := range fairModes {
		y := fairConfig("http://127.0.0.1:1", mode, tenants).yaml()
		if _, err := config.Parse([]byte(y)); err != nil {
			t.Fatalf("mode %s: the config does not parse: %v\n%s", mode, err, y)
		}
	}
	capped := fairConfig("http://127.0.0.1:1", "capped", tenants).yaml()
	for _, want := range []string{
		"fairness: {mode: fair}\n",
		`- {id: w4, keys: ["sk-w4"], weight: 4}`, `- {id: lo, keys: ["sk-lo"], priority: low}`,
		"max_concurrency: 8, fixed_concurrency: true,", "rate: 1000",
	} {
		if !strings.Contains(capped, want) {
			t.Errorf("capped config lacks %q:\n%s", want, capped)
		}
	}
	def := fairConfig("http://127.0.0.1:1", "default", tenants).yaml()
	for _, no := range []string{"fairness", "max_concurrency", "fixed_concurrency"} {
		if strings.Contains(def, no) {
			t.Errorf("default config sets %s:\n%s", no, def)
		}
	}
}

// fakeFairRuns fabricates one mode's windows: light tenants at ttft ms
// and tps tokens/s, the others backlogged with served in the given ratio.
func fakeFairRuns(cases []fairCase, lightTTFT, highTTFT, suspends float64, weighted []float64) map[string]map[string]fairWindow {
	win := 2 * time.Second
	tw := func(ttft float64, completion int) tenantWindow {
		return tenantWindow{Requests: 10, Completion: completion, TTFT: []float64{ttft, ttft}}
	}
	out := map[string]map[string]fairWindow{}
	for _, fc := range cases {
		out[fc.ID] = map[string]fairWindow{}
		for _, ph := range fc.Phases {
			w := fairWindow{Window: win, Tenants: map[string]tenantWindow{}}
			if ph.Name == "loaded" {
				w.Suspends = suspends
			}
			for i, id := range ph.Load {
				switch {
				case id == "heavy":
					w.Tenants[id] = tw(20, 2000)
				case fc.ID == "noisy":
					w.Tenants[id] = tw(map[bool]float64{true: 20, false: lightTTFT}[ph.Name == "alone"], 600)
				case id == "hi":
					w.Tenants[id] = tw(map[bool]float64{true: 20, false: highTTFT}[ph.Name == "alone"], 600)
				default:
					w.Tenants[id] = tw(100, int(1000*weighted[i%len(weighted)]))
				}
			}
			out[fc.ID][ph.Name] = w
		}
	}
	return out
}

func TestFairReport(t *testing.T) {
	cases := fairCases(2 * time.Second)
	e := &env{mode: "quick", out: t.TempDir()}
	runs := fairRuns{
		"poll":    fakeFairRuns(cases, 1200, 900, 5000, []float64{1, 1, 1}),
		"capped":  fakeFairRuns(cases, 200, 220, 0, []float64{1, 2, 4}),
		"default": fakeFairRuns(cases, 25, 22, 0, []float64{1, 2, 4}),
	}
	res := &ScenarioResult{}
	fairReport(e, res, cases, runs)
	if len(res.Bars) != len(fairChecks) {
		t.Fatalf("%d bars, want %d", len(res.Bars), len(fairChecks))
	}
	// Every target met on the default run (the one judged) except the
	// lengths one: the fake served the two tenants of equal weight 1:2.
	for i, b := range res.Bars {
		wantPass := !strings.Contains(b.Claim, "outputs 64")
		if b.Pass != wantPass || !strings.Contains(b.Measured, "poll: ") || !strings.Contains(b.Measured, "capped: ") {
			t.Errorf("bar %d %q: pass %v, measured %q", i, b.Claim, b.Pass, b.Measured)
		}
	}
	if got := res.Bars[0].Measured; !strings.Contains(got, "poll: 60.00× (1200.0 vs 20.0 ms); capped: 10.00×") || !strings.Contains(got, "default: 1.25×") {
		t.Errorf("TTFT bar measured %q", got)
	}
	if got := res.Bars[2].Measured; !strings.Contains(got, "default: 100.0 %") {
		t.Errorf("lengths bar measured %q", got)
	}
	if len(res.Tables) != len(cases)+1 || len(res.Plots) != len(cases)+1 {
		t.Errorf("%d tables and %d plots, want %d each", len(res.Tables), len(res.Plots), len(cases)+1)
	}

	pollOnly := &ScenarioResult{}
	fairReport(e, pollOnly, cases, fairRuns{"poll": runs["poll"]})
	for _, b := range pollOnly.Bars {
		if b.Pass || !strings.HasSuffix(b.Measured, "capped: not run; default: not run") {
			t.Errorf("poll only: bar %q pass %v, measured %q", b.Claim, b.Pass, b.Measured)
		}
	}
	if row := pollOnly.Tables[0].Rows[0]; row[len(row)-1] != "—" {
		t.Errorf("poll only: default columns of %v should be —", row)
	}
}
