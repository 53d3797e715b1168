package main

import (
	"fmt"
	"math"
	"strings"
)

// jain is Jain's fairness index (Σx)² / (n·Σx²) of xs: 1 when all are
// equal, 1/n when one takes everything. NaN for an empty or all-zero set.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// shareErrors returns, per tenant, how far its share of the total served
// is from its share of the total weight: share/expected − 1 (0.05 = 5 %
// more than its weight entitles it to). NaN when nothing was served.
func shareErrors(served, weights []float64) []float64 {
	var ts, tw float64
	for i := range served {
		ts += served[i]
		tw += weights[i]
	}
	out := make([]float64, len(served))
	for i := range served {
		out[i] = ratio(ratio(served[i], ts), ratio(weights[i], tw)) - 1
	}
	return out
}

// maxAbs is the largest |x| (NaN if any is NaN, 0 for none).
func maxAbs(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		if math.IsNaN(x) {
			return math.NaN()
		}
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// fairFigures are one mode's headline numbers (NaN where a case did not run).
type fairFigures struct {
	LightTTFTAlone, LightTTFTLoaded float64 // ms, p99 of a, b and c pooled
	LightTokensRatio                float64 // worst light tenant's tokens/s beside heavy ÷ alone
	PoolTokensPerSec                float64 // completion tokens/s of all four tenants beside heavy
	LengthsGap                      float64 // |out64 ÷ out512 completion tokens − 1|, the larger over the smaller
	WeightsWorst                    float64 // largest |share/expected − 1|, weights 1:2:4
	HighTTFTAlone, HighTTFTLoaded   float64 // ms, p99
	Suspends, SuspendSeconds        float64 // capacity suspends over the saturated windows, and their length
}

func tokensPerSec(tw tenantWindow, w fairWindow) float64 {
	return ratio(float64(tw.Completion), w.Window.Seconds())
}

func pooledTTFT(w fairWindow, ids ...string) []float64 {
	var xs []float64
	for _, id := range ids {
		xs = append(xs, w.Tenants[id].TTFT...)
	}
	return xs
}

// fairFiguresOf computes a mode's figures from its windows (case → phase → window).
func fairFiguresOf(cases []fairCase, byCase map[string]map[string]fairWindow) fairFigures {
	f := fairFigures{}
	for _, p := range []*float64{&f.LightTTFTAlone, &f.LightTTFTLoaded, &f.LightTokensRatio, &f.PoolTokensPerSec,
		&f.LengthsGap, &f.WeightsWorst, &f.HighTTFTAlone, &f.HighTTFTLoaded} {
		*p = math.NaN()
	}
	if n := byCase["noisy"]; n != nil {
		alone, loaded := n["alone"], n["loaded"]
		light := []string{"a", "b", "c"}
		f.LightTTFTAlone = Quantile(pooledTTFT(alone, light...), 0.99)
		f.LightTTFTLoaded = Quantile(pooledTTFT(loaded, light...), 0.99)
		f.LightTokensRatio = math.Inf(1)
		for _, id := range light {
			f.LightTokensRatio = math.Min(f.LightTokensRatio,
				ratio(tokensPerSec(loaded.Tenants[id], loaded), tokensPerSec(alone.Tenants[id], alone)))
		}
		f.PoolTokensPerSec = 0
		for _, tw := range loaded.Tenants {
			f.PoolTokensPerSec += tokensPerSec(tw, loaded)
		}
	}
	for _, fc := range cases {
		w, ok := byCase[fc.ID]["loaded"]
		if !ok {
			continue
		}
		f.Suspends += w.Suspends
		f.SuspendSeconds += w.Window.Seconds()
		var served, weights []float64
		for _, t := range fc.Tenants {
			s := w.Tenants[t.ID].served(fairCompletionWeight)
			served, weights = append(served, s), append(weights, t.weight())
		}
		switch fc.ID {
		case "lengths":
			a, b := float64(w.Tenants["out64"].Completion), float64(w.Tenants["out512"].Completion)
			f.LengthsGap = ratio(math.Max(a, b), math.Min(a, b)) - 1
		case "weights":
			f.WeightsWorst = maxAbs(shareErrors(served, weights))
		case "bands":
			f.HighTTFTAlone = Quantile(pooledTTFT(byCase[fc.ID]["alone"], "hi"), 0.99)
			f.HighTTFTLoaded = Quantile(pooledTTFT(w, "hi"), 0.99)
		}
	}
	return f
}

// fairJudged is the mode each target is checked on: the default, no
// fairness settings and no max_concurrency. Every mode's figure is shown
// beside it.
const fairJudged = "default"

// fairCheck is one claim and its bar, checked on the fairJudged run.
type fairCheck struct {
	claim, target, metric string
	value                 func(f, poll fairFigures) float64
	show                  func(f fairFigures, v float64) string
	ok                    func(v float64) bool
}

var fairChecks = []fairCheck{
	{"noisy neighbour: light tenants' TTFT p99 beside heavy vs alone", "≤ 1.5× (default)", "light_ttft_p99_ratio",
		func(f, _ fairFigures) float64 { return ratio(f.LightTTFTLoaded, f.LightTTFTAlone) },
		func(f fairFigures, v float64) string {
			return fmt.Sprintf("%s× (%s vs %s ms)", f2(v), f1(f.LightTTFTLoaded), f1(f.LightTTFTAlone))
		},
		func(v float64) bool { return v <= 1.5 }},
	{"noisy neighbour: pool throughput beside heavy vs poll", "≥ 0.95× poll (default)", "pool_tokens_ratio",
		func(f, poll fairFigures) float64 { return ratio(f.PoolTokensPerSec, poll.PoolTokensPerSec) },
		func(f fairFigures, v float64) string {
			return fmt.Sprintf("%s× (%.0f tok/s)", f2(v), f.PoolTokensPerSec)
		},
		func(v float64) bool { return v >= 0.95 }},
	{"outputs 64 (16 streams) and 512 (8 streams), equal weights, both backlogged: completion tokens apart", "within 15 % (default)", "lengths_gap",
		func(f, _ fairFigures) float64 { return f.LengthsGap },
		func(_ fairFigures, v float64) string { return fmt.Sprintf("%.1f %%", 100*v) },
		func(v float64) bool { return v <= 0.15 }},
	{"weights 1 : 2 : 4: tokens served vs weight share (worst tenant)", "each within 5 % (default)", "weights_worst_dev",
		func(f, _ fairFigures) float64 { return f.WeightsWorst },
		func(_ fairFigures, v float64) string { return fmt.Sprintf("%.1f %% off", 100*v) },
		func(v float64) bool { return v <= 0.05 }},
	{"bands: high tenant's TTFT p99 under saturation vs alone", "≤ 1.25× (default)", "high_ttft_p99_ratio",
		func(f, _ fairFigures) float64 { return ratio(f.HighTTFTLoaded, f.HighTTFTAlone) },
		func(f fairFigures, v float64) string {
			return fmt.Sprintf("%s× (%s vs %s ms)", f2(v), f1(f.HighTTFTLoaded), f1(f.HighTTFTAlone))
		},
		func(v float64) bool { return v <= 1.25 }},
	{"cost: capacity-poll wake-ups while saturated", "0 (default)", "capacity_suspends",
		func(f, _ fairFigures) float64 { return f.Suspends },
		func(f fairFigures, v float64) string {
			return fmt.Sprintf("%.0f (%.0f/s)", v, ratio(v, f.SuspendSeconds))
		},
		func(v float64) bool { return v == 0 }},
}

// fairBars adds one bar per check: every mode's figure side by side;
// met only when the fairJudged run meets the target.
func fairBars(res *ScenarioResult, figs map[string]fairFigures) {
	poll := figs["poll"]
	for _, c := range fairChecks {
		var parts []string
		pass := false
		for _, mode := range fairModes {
			f, ok := figs[mode]
			if !ok {
				parts = append(parts, mode+": not run")
				continue
			}
			v := c.value(f, poll)
			res.metric(c.metric+"_"+mode, v)
			parts = append(parts, mode+": "+c.show(f, v))
			if mode == fairJudged {
				pass = c.ok(v)
			}
		}
		res.bar(c.claim, c.target, strings.Join(parts, "; "), pass)
	}
}

// fairReport fills res from the runs.
func fairReport(e *env, res *ScenarioResult, cases []fairCase, runs fairRuns) {
	figs := map[string]fairFigures{}
	for _, mode := range fairModes {
		if byCase, ok := runs[mode]; ok {
			figs[mode] = fairFiguresOf(cases, byCase)
		}
	}
	fairBars(res, figs)
	for _, fc := range cases {
		res.Tables = append(res.Tables, fairCaseTable(fc, runs))
	}
	res.Tables = append(res.Tables, fairCostTable(cases, runs))
	for _, mode := range fairModes {
		for _, fc := range cases {
			for _, ph := range fc.Phases {
				w, ok := runs[mode][fc.ID][ph.Name]
				if !ok {
					continue
				}
				for _, t := range fc.Tenants {
					if tw, ok := w.Tenants[t.ID]; ok && (tw.Errors > 0 || tw.NoFirst > 0) {
						res.note("%s, %s, mode %s: tenant %s had %d errors and %d requests without a first token when the load stopped",
							fc.Title, ph.Label, mode, t.ID, tw.Errors, tw.NoFirst)
					}
				}
			}
		}
	}
	fairPlots(e, res, cases, runs, figs)
}

// fairCaseTable has one row per phase and tenant, the modes side by side.
func fairCaseTable(fc fairCase, runs fairRuns) Table {
	t := Table{Title: fc.Title, Header: []string{"phase", "tenant", "load, weight, priority"}}
	for _, mode := range fairModes {
		t.Header = append(t.Header, mode+" tok/s", mode+" TTFT p50 / p99 (ms)", mode+" served÷weight share")
	}
	for _, ph := range fc.Phases {
		for _, id := range ph.Load {
			ten := fc.tenant(id)
			load := fmt.Sprintf("%d × %d tok, w %g, %s", ten.Streams, ten.Tokens, ten.weight(), ten.priority())
			if ten.Think > 0 {
				load += fmt.Sprintf(", pause %s", ten.Think)
			}
			row := []string{ph.Label, id, load}
			for _, mode := range fairModes {
				w, ok := runs[mode][fc.ID][ph.Name]
				if !ok {
					row = append(row, "—", "—", "—")
					continue
				}
				tw := w.Tenants[id]
				row = append(row, fmt.Sprintf("%.0f", tokensPerSec(tw, w)),
					fmt.Sprintf("%s / %s", f1OrDash(Quantile(tw.TTFT, 0.5)), f1OrDash(Quantile(tw.TTFT, 0.99))),
					pct(servedShare(fc, ph, w, id)))
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

// f1OrDash is f1, or "—" for NaN (no sample: e.g. no 1024-token stream
// started in the window).
func f1OrDash(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return f1(v)
}

// servedShare is id's share of the phase's total served÷weight.
func servedShare(fc fairCase, ph fairPhase, w fairWindow, id string) float64 {
	var total float64
	for _, l := range ph.Load {
		total += w.Tenants[l].served(fairCompletionWeight) / fc.tenant(l).weight()
	}
	return ratio(w.Tenants[id].served(fairCompletionWeight)/fc.tenant(id).weight(), total)
}

func fairCostTable(cases []fairCase, runs fairRuns) Table {
	t := Table{Title: "Capacity-poll wake-ups (pacegate_suspends_total{reason=\"capacity\"}) in the saturated windows", Header: []string{"case"}}
	for _, mode := range fairModes {
		t.Header = append(t.Header, mode+" wake-ups", mode+" per s")
	}
	for _, fc := range cases {
		row := []string{fc.Title}
		for _, mode := range fairModes {
			w, ok := runs[mode][fc.ID]["loaded"]
			if !ok {
				row = append(row, "—", "—")
				continue
			}
			row = append(row, fmt.Sprintf("%.0f", w.Suspends), fmt.Sprintf("%.0f", ratio(w.Suspends, w.Window.Seconds())))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func fairPlots(e *env, res *ScenarioResult, cases []fairCase, runs fairRuns, figs map[string]fairFigures) {
	e.plot(res, "fairness-ttft", "TTFT p99 (ms, client side): light tenants alone and beside heavy; the high tenant alone and under saturation; per mode",
		fairTTFTBars(figs).SVG())
	for _, fc := range cases {
		e.plot(res, "fairness-"+fc.ID, fmt.Sprintf("%s: completion tokens/s per tenant, per mode", fc.Title), fairTokenBars(fc, runs).SVG())
	}
}

func fairTTFTBars(figs map[string]fairFigures) *BarChart {
	c := &BarChart{Title: "TTFT p99 per mode", YLabel: "TTFT p99 (ms)",
		Categories: []string{"light, alone", "light, beside heavy", "high, alone", "high, saturated"}}
	for _, mode := range fairModes {
		if f, ok := figs[mode]; ok {
			c.Series = append(c.Series, BarSeries{Name: mode,
				Values: []float64{f.LightTTFTAlone, f.LightTTFTLoaded, f.HighTTFTAlone, f.HighTTFTLoaded}})
		}
	}
	return c
}

// fairTokenBars: one group per tenant, one bar per mode and phase.
func fairTokenBars(fc fairCase, runs fairRuns) *BarChart {
	c := &BarChart{Title: fc.Title + ": tokens/s per tenant", YLabel: "completion tokens/s"}
	for _, t := range fc.Tenants {
		c.Categories = append(c.Categories, t.ID)
	}
	for _, mode := range fairModes {
		for _, ph := range fc.Phases {
			w, ok := runs[mode][fc.ID][ph.Name]
			if !ok {
				continue
			}
			s := BarSeries{Name: mode + ", " + ph.Label}
			for _, t := range fc.Tenants {
				v := math.NaN()
				if tw, ok := w.Tenants[t.ID]; ok {
					v = tokensPerSec(tw, w)
				}
				s.Values = append(s.Values, v)
			}
			c.Series = append(c.Series, s)
		}
	}
	return c
}

// fairBrokerReport adds the noisy-neighbour case on RocketMQ, with the
// embedded run's figures of the same case beside it.
func fairBrokerReport(res *ScenarioResult, fc fairCase, embedded, broker fairRuns) {
	t := Table{Title: fc.Title + ": embedded vs RocketMQ (same run)",
		Header: []string{"backend", "mode", "phase", "light TTFT p50 / p99 (ms)", "light tok/s a / b / c",
			"heavy tok/s", "pool tok/s", "capacity wake-ups (per s)"}}
	light := []string{"a", "b", "c"}
	for _, b := range []struct {
		name string
		runs fairRuns
	}{{"embedded", embedded}, {"rocketmq", broker}} {
		for _, mode := range fairBrokerModes {
			byCase, ok := b.runs[mode]
			if !ok {
				continue
			}
			for _, ph := range fc.Phases {
				w, ok := byCase[fc.ID][ph.Name]
				if !ok {
					continue
				}
				ttft := pooledTTFT(w, light...)
				var lt []string
				pool := 0.0
				for _, tw := range w.Tenants {
					pool += tokensPerSec(tw, w)
				}
				for _, id := range light {
					lt = append(lt, fmt.Sprintf("%.0f", tokensPerSec(w.Tenants[id], w)))
				}
				heavy, wake := "—", "—"
				if tw, ok := w.Tenants["heavy"]; ok {
					heavy = fmt.Sprintf("%.0f", tokensPerSec(tw, w))
					wake = fmt.Sprintf("%.0f (%.0f)", w.Suspends, ratio(w.Suspends, w.Window.Seconds()))
				}
				if b.name == "rocketmq" {
					for _, id := range ph.Load {
						if tw := w.Tenants[id]; tw.Errors > 0 || tw.NoFirst > 0 {
							res.note("%s, %s, mode %s, on RocketMQ: tenant %s had %d errors and %d requests without a first token when the load stopped",
								fc.Title, ph.Label, mode, id, tw.Errors, tw.NoFirst)
						}
					}
				}
				t.Rows = append(t.Rows, []string{b.name, mode, ph.Label,
					fmt.Sprintf("%s / %s", f1OrDash(Quantile(ttft, 0.5)), f1OrDash(Quantile(ttft, 0.99))),
					strings.Join(lt, " / "), heavy, fmt.Sprintf("%.0f", pool), wake})
			}
			if b.name == "rocketmq" {
				f := fairFiguresOf([]fairCase{fc}, byCase)
				res.metric("rmq_light_ttft_p99_ratio_"+mode, ratio(f.LightTTFTLoaded, f.LightTTFTAlone))
				res.metric("rmq_light_tokens_ratio_"+mode, f.LightTokensRatio)
				res.metric("rmq_pool_tokens_"+mode, f.PoolTokensPerSec)
				res.metric("rmq_capacity_suspends_"+mode, f.Suspends)
			}
		}
	}
	res.Tables = append(res.Tables, t)
	res.note("On RocketMQ (PACEGATE_ROCKETMQ_ENDPOINT set) the noisy-neighbour case also ran on the broker. A suspension there " +
		"cannot be ended early: in mode fair a bucket waiting for a slot is suspended for 50 ms (the client's minimum) and the slot granted to it is held " +
		"until its next delivery (up to one suspension plus the broker's ~100 ms re-dispatch tick); mode poll's 25 ms retry becomes " +
		"the client's 50 ms minimum Suspend plus that tick. Capacity wake-ups count reason capacity (poll) or capacity_recheck (fair).")
}
