package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// ohDiff is pacegate minus bare for one interleaved pair of rounds.
type ohDiff struct {
	tputRatio, ttftP50, ttftP99, chunkP50, chunkP99 float64
	toSimP50, atSimP50                              float64 // TTFT's legs (see ohRound)
}

func ohDiffs(bare, pg []ohRound) []ohDiff {
	var ds []ohDiff
	for i := range min(len(bare), len(pg)) {
		b, p := bare[i], pg[i]
		ds = append(ds, ohDiff{
			tputRatio: ratio(p.tput, b.tput),
			ttftP50:   Quantile(p.pathTTFT, 0.5) - Quantile(b.pathTTFT, 0.5),
			ttftP99:   Quantile(p.pathTTFT, 0.99) - Quantile(b.pathTTFT, 0.99),
			chunkP50:  Quantile(p.chunkLat, 0.5) - Quantile(b.chunkLat, 0.5),
			chunkP99:  Quantile(p.chunkLat, 0.99) - Quantile(b.chunkLat, 0.99),
			toSimP50:  Quantile(p.toSim, 0.5) - Quantile(b.toSim, 0.5),
			atSimP50:  Quantile(p.atSim, 0.5) - Quantile(b.atSim, 0.5),
		})
	}
	return ds
}

func medianOf(ds []ohDiff, f func(ohDiff) float64) float64 {
	return Median(pick(ds, f))
}

// pick is f of each round's differences, in round order.
func pick(ds []ohDiff, f func(ohDiff) float64) []float64 {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = f(d)
	}
	return xs
}

// ohReport reports the latency rounds: warm is the warm-up's bare and
// pacegate rounds, shown and not counted.
func ohReport(e *env, res *ScenarioResult, warm [2]ohRound, bare, pg []ohRound) {
	ds := ohDiffs(bare, pg)
	tr := medianOf(ds, func(d ohDiff) float64 { return d.tputRatio })
	t50 := medianOf(ds, func(d ohDiff) float64 { return d.ttftP50 })
	t99 := medianOf(ds, func(d ohDiff) float64 { return d.ttftP99 })
	c50 := medianOf(ds, func(d ohDiff) float64 { return d.chunkP50 })
	c99 := medianOf(ds, func(d ohDiff) float64 { return d.chunkP99 })
	res.metric("throughput_ratio", tr)
	res.metric("added_ttft_p50_ms", t50)
	res.metric("added_ttft_p99_ms", t99)
	res.metric("added_chunk_p50_us", c50)
	res.metric("added_chunk_p99_us", c99)
	toSim := medianOf(ds, func(d ohDiff) float64 { return d.toSimP50 })
	atSim := medianOf(ds, func(d ohDiff) float64 { return d.atSimP50 })
	res.metric("added_to_sim_p50_ms", toSim)
	res.metric("added_at_sim_p50_ms", atSim)
	res.bar("throughput vs bare proxy", "≥ 0.98×", f3(tr)+"×", tr >= 0.98)
	res.bar("added TTFT p50", "< 0.3 ms", f3(t50)+" ms", t50 < 0.3)
	res.bar("added TTFT p99", "< 2 ms", f3(t99)+" ms", t99 < 2)
	res.bar("added per-chunk latency p50", "< 20 µs", f1(c50)+" µs", c50 < 20)
	t := Table{Title: "Rounds (interleaved)", Header: []string{"round", "path", "ok / errors", "responses/s", "TTFT p50 (ms)",
		"TTFT p99 (ms)", "to the sim p50 (ms)", "at the sim p50 (ms)", "TTFT less the sim's p50 (ms)", "TTFT less the sim's p99 (ms)",
		"chunk latency p50 (µs)", "chunk latency p99 (µs)"}}
	for _, r := range warm {
		t.Rows = append(t.Rows, ohRow("warm-up", r))
	}
	for i := range min(len(bare), len(pg)) {
		t.Rows = append(t.Rows, ohRow(fmt.Sprint(i+1), bare[i]), ohRow(fmt.Sprint(i+1), pg[i]))
	}
	res.Tables = append(res.Tables, t)
	// The warm-up pair ran the bare proxy first, so the counted pairs
	// start with pacegate first (see ohLatencyRounds).
	res.note("By the order of a pair's rounds: added TTFT p50 %s; added per-chunk p50 %s.",
		byOrder(pick(ds, func(d ohDiff) float64 { return d.ttftP50 }), 1, "ms"),
		byOrder(pick(ds, func(d ohDiff) float64 { return d.chunkP50 }), 1, "µs"))
	coldB, coldP := Quantile(warm[0].pathTTFT, 0.99), Quantile(warm[1].pathTTFT, 0.99)
	res.metric("warmup_added_ttft_p99_ms", coldP-coldB)
	res.note("The warm-up rounds (each path's first requests after its process started; not counted): TTFT less the sim's p99 "+
		"%s ms through pacegate, %s ms through the bare proxy. A fresh process's first requests are not what a gateway serving "+
		"for hours adds.", f3(coldP), f3(coldB))
	res.note("Added chunk latency p99 (median over rounds): %s µs. The sim's TTFT is %s; the added TTFT figures compare each "+
		"request's TTFT less its own time at the sim (arrival → first chunk write, both stamped in the harness), which is what the "+
		"path adds to its first token: pacegate's p50/p99 of it minus the bare proxy's in the same round. These rounds' sim "+
		"gives each stream a clock of its own (vllmsim's OwnClocks): with the engine's steps, which produce every running "+
		"stream's token together, the %d streams' chunks leave the sim in one burst every ITL (%s), and a chunk's latency through "+
		"either path is mostly its place in the queue of the burst (p50 265–400 µs for the bare proxy and pacegate alike, in "+
		"three runs), which the difference of two such figures measures poorly. The clients' first requests are spread over "+
		"one stream's length for the same reason: clients started together stay in step, and so would their streams' clocks.",
		f1(c99), ohTTFT, ohClients, ohITL)
	res.note("TTFT's legs, p50, pacegate minus the bare proxy (median over rounds): client send → the request's arrival at the sim "+
		"%s ms (the gateway's request path: parse, admission, queue, dispatch), arrival → the sim's first chunk %s ms (the sim's "+
		"own time, which the gateway does not spend), then the first chunk's way back (the per-chunk latency above).", f3(toSim), f3(atSim))
	e.plot(res, "overhead-ttft", "TTFT CDF, all rounds pooled: bare proxy vs pacegate", pooledCDF("TTFT", "TTFT (ms)", bare, pg,
		func(r ohRound) []float64 { return r.ttft }, false).SVG())
	e.plot(res, "overhead-chunk", "Per-chunk latency CDF (sim write → client receive), log10 µs", pooledCDF("Per-chunk latency",
		"log10 latency (µs)", bare, pg, func(r ohRound) []float64 { return r.chunkLat }, true).SVG())
}

// ohRow is round r's row of the latency rounds' table.
func ohRow(round string, r ohRound) []string {
	return []string{round, r.path, fmt.Sprintf("%d / %d", r.ok, r.errs), f1(r.tput),
		f3(Quantile(r.ttft, 0.5)), f3(Quantile(r.ttft, 0.99)), f3(Quantile(r.toSim, 0.5)), f3(Quantile(r.atSim, 0.5)),
		f3(Quantile(r.pathTTFT, 0.5)), f3(Quantile(r.pathTTFT, 0.99)), f1(Quantile(r.chunkLat, 0.5)), f1(Quantile(r.chunkLat, 0.99))}
}

func pooledCDF(title, xlabel string, bare, pg []ohRound, f func(ohRound) []float64, logx bool) *Chart {
	c := &Chart{Title: title + ", CDF", XLabel: xlabel, YLabel: "fraction ≤ x"}
	for _, set := range [][]ohRound{bare, pg} {
		var xs []float64
		for _, r := range set {
			xs = append(xs, f(r)...)
		}
		pts := cdf(xs, 400)
		if logx {
			for i := range pts {
				pts[i].X = math.Log10(math.Max(pts[i].X, 1))
			}
		}
		c.Series = append(c.Series, Series{Name: set[0].path, Points: pts})
	}
	return c
}

// ohProcReport adds the process rounds: CPU per request of each kind
// and the added TTFT at 1,000 req/s.
func ohProcReport(res *ScenarioResult, cpuB, cpuP, openB, openP []ohProcRound) {
	var open50, open99 []float64
	var switchNotes []string
	jsonCPU := "not measured"
	for _, k := range ohProcKinds {
		r, p, b, ok := ohCPUMedians(cpuB, cpuP, k)
		if !ok {
			continue
		}
		sfx := fmt.Sprintf("_%dtok", k.tokens)
		if !k.stream {
			sfx += "_json"
		}
		res.metric("cpu_per_request_ratio"+sfx, r)
		res.metric("cpu_per_request_us"+sfx, p)
		res.metric("cpu_per_request_bare_us"+sfx, b)
		measured := fmt.Sprintf("%s× (median of per-round ratios; medians %s vs %s µs)", f3(r), f1(p), f1(b))
		if !k.stream { // the bars are a stream's; this one is reported
			jsonCPU = measured
			continue
		}
		res.bar(fmt.Sprintf("CPU per streamed request vs bare proxy, %d tokens", k.tokens), "≤ 1.15×", measured, r <= 1.15)
		if f, ok := ohSwitchFit(cpuB, cpuP, k); ok {
			res.metric("switches_per_request"+sfx, f.pg)
			res.metric("switches_per_request_bare"+sfx, f.bare)
			res.metric("cpu_per_switch_us"+sfx, f.perSwitch)
			res.metric("cpu_per_request_ratio_at_equal_switches"+sfx, f.atEqual)
			switchNotes = append(switchNotes, fmt.Sprintf("%s: %s context switches per request in pacegate against %s in the bare proxy (medians), "+
				"%s µs of CPU per switch, %s× at equal switches", k, f1(f.pg), f1(f.bare), f1(f.perSwitch), f3(f.atEqual)))
		}
	}
	for i := range min(len(openB), len(openP)) {
		open50 = append(open50, Quantile(openP[i].ttft, 0.5)-Quantile(openB[i].ttft, 0.5))
		open99 = append(open99, Quantile(openP[i].ttft, 0.99)-Quantile(openB[i].ttft, 0.99))
	}
	if len(open99) > 0 {
		t50, t99 := Median(open50), Median(open99)
		res.metric("open_added_ttft_p50_ms", t50)
		res.metric("open_added_ttft_p99_ms", t99)
		res.bar(fmt.Sprintf("added TTFT p99 at %s req/s", fmt.Sprintf("%.0f", float64(ohOpenRate))), "< 2 ms", f3(t99)+" ms", t99 < 2)
		res.note("Added TTFT p99 at 1,000 req/s by the order of a pair's rounds: %s.", byOrder(open99, 0, "ms"))
	}
	ohQueueWaitReport(res, openP)
	t := Table{Title: "Processes: CPU rounds (both at once) and 1,000 req/s rounds (interleaved, each path first in half the pairs)", Header: []string{"round", "kind", "path",
		"ok / errors", "CPU (ms)", "CPU per request (µs)", "switches per request", "TTFT p50 (ms)", "TTFT p99 (ms)"}}
	// per is how many rounds make one round of the kind (one per kind for
	// the CPU rounds).
	rows := func(kind string, per int, b, p []ohProcRound) {
		for i := range min(len(b), len(p)) {
			for _, r := range []ohProcRound{b[i], p[i]} {
				t.Rows = append(t.Rows, []string{fmt.Sprint(i/per + 1), fmt.Sprintf("%s, %s", kind, r.kind), r.path, fmt.Sprintf("%d / %d", r.ok, r.errs),
					f1(ms(r.cpu)), f1(r.cpuPerReq()), f1(r.switchesPerReq()), f3(Quantile(r.ttft, 0.5)), f3(Quantile(r.ttft, 0.99))})
			}
		}
	}
	rows("closed", len(ohProcKinds), cpuB, cpuP)
	rows(fmt.Sprintf("%.0f/s open", float64(ohOpenRate)), 1, openB, openP)
	res.Tables = append(res.Tables, t)
	res.note("CPU per streamed request = utime+stime of the process (/proc/<pid>/stat, all threads, 10 ms ticks) from just "+
		"before a round's first request to just after its last one ended, divided by the requests completed in the round; "+
		"pacegate runs as its own process (`go build -o` of the module, `pacegate --config`, JSON access log to a pipe the "+
		"harness drains; pool max_concurrency 1024, out of reach like the pacing rate) and the bare proxy as a re-executed bench binary; the sim stays in the harness. CPU rounds: %d "+
		"closed-loop clients per process, both processes at once, rounds of %s (JSON: not streamed, its TTFT columns are the whole answer's), client w on tenant t<w> (its own bucket, pacing rate %d/s, never binding). "+
		"Open-loop rounds: %s req/s on a fixed grid, request i on tenant t<i mod %d> (5 req/s per bucket), %d-token streams. "+
		"Added TTFT p50 at 1,000 req/s (median over rounds): %s ms. CPU per non-streamed request (8 tokens, one JSON body; "+
		"no bar: the issue's are a stream's): %s.", ohProcClients, ohKindsList(), ohProcRate,
		fmt.Sprintf("%.0f", float64(ohOpenRate)), ohOpenTenants, ohOpenTokens, f3(Median(open50)), jsonCPU)
	if len(switchNotes) > 0 {
		res.note("Context switches (voluntary and not, of all threads: /proc/<pid>/task/*/status) per request, and what they explain of the CPU ratio. "+
			"On this VM a switch is among the dearest things a process does, and how many a Go process makes per request moves from round to round "+
			"(its idle threads park and are woken again), in each process on its own; a round's ratio follows the two counts. A line fitted over "+
			"the rounds of a kind, CPU per request = a + b × switches per request, with one slope b for both processes and an intercept a each, "+
			"gives the CPU a switch costs (b) and the ratio the two processes would have at the same switches, the rounds' mean "+
			"((a_pacegate + b·mean) / (a_bare + b·mean)). It explains the spread of the ratio; the bar is judged on the measured median. %s.",
			strings.Join(switchNotes, "; "))
	}
}

// ohSwitchCPU is what ohSwitchFit finds over the CPU rounds of a kind.
type ohSwitchCPU struct {
	pg, bare  float64 // median context switches per request
	perSwitch float64 // µs of CPU per context switch (the common slope)
	atEqual   float64 // pacegate's CPU per request over the bare proxy's at the rounds' mean switches
}

// ohSwitchFit fits CPU per request against context switches per request
// over the rounds of kind k (see commonSlope); false without two rounds,
// or when the switches do not vary or explain no CPU.
func ohSwitchFit(cpuB, cpuP []ohProcRound, k ohProcKind) (ohSwitchCPU, bool) {
	xs, ys := make([][]float64, 2), make([][]float64, 2) // 0: pacegate, 1: bare
	for i := range min(len(cpuB), len(cpuP)) {
		if cpuB[i].kind != k || cpuB[i].ok == 0 || cpuP[i].ok == 0 {
			continue
		}
		for g, r := range []ohProcRound{cpuP[i], cpuB[i]} {
			xs[g] = append(xs[g], r.switchesPerReq())
			ys[g] = append(ys[g], r.cpuPerReq())
		}
	}
	if len(xs[0]) < 2 {
		return ohSwitchCPU{}, false
	}
	b, a := commonSlope(xs, ys)
	if math.IsNaN(b) || b <= 0 {
		return ohSwitchCPU{}, false
	}
	m := mean(append(slices.Clone(xs[0]), xs[1]...))
	return ohSwitchCPU{pg: Median(xs[0]), bare: Median(xs[1]), perSwitch: b, atEqual: ratio(a[0]+b*m, a[1]+b*m)}, true
}

// ohCPUMedians is the median over rounds of kind k of pacegate's CPU per
// request against the bare proxy's in the same round, with pacegate's
// and the proxy's medians; false without such a round.
func ohCPUMedians(cpuB, cpuP []ohProcRound, k ohProcKind) (ratioMed, pg, bare float64, ok bool) {
	var ratios, bs, ps []float64
	for i := range min(len(cpuB), len(cpuP)) {
		if cpuB[i].kind != k || cpuB[i].ok == 0 || cpuP[i].ok == 0 {
			continue
		}
		ratios = append(ratios, ratio(cpuP[i].cpuPerReq(), cpuB[i].cpuPerReq()))
		bs = append(bs, cpuB[i].cpuPerReq())
		ps = append(ps, cpuP[i].cpuPerReq())
	}
	if len(ratios) == 0 {
		return 0, 0, 0, false
	}
	return Median(ratios), Median(ps), Median(bs), true
}

// byOrder lists per-pair figures split by which path ran first: the bare
// proxy in the pairs of parity bareParity (the first pair is 0), pacegate
// in the others.
func byOrder(perPair []float64, bareParity int, unit string) string {
	var bareFirst, pgFirst []string
	for i, v := range perPair {
		if i%2 == bareParity {
			bareFirst = append(bareFirst, f3(v))
		} else {
			pgFirst = append(pgFirst, f3(v))
		}
	}
	return fmt.Sprintf("the bare proxy first %s %s, pacegate first %s %s", strings.Join(bareFirst, ", "), unit, strings.Join(pgFirst, ", "), unit)
}

// ohQueueWaitReport reports what pacegate's process spends between a
// request's admission and its release at 1,000 req/s: its queue waits
// over the open rounds, read from its pacegate_queue_wait_seconds. No
// request waits for its pace or a slot there, so a wait is the queue's
// own cost as the gateway lives it: the admission's checks and the
// request's setup, then BenchmarkQueueHop's hop up to the consumer's checks,
// within the histogram's buckets.
func ohQueueWaitReport(res *ScenarioResult, openP []ohProcRound) {
	var pooled waitHist
	var rounds []string
	for _, r := range openP {
		if r.waits.count() == 0 {
			continue
		}
		pooled = pooled.add(r.waits)
		rounds = append(rounds, fmt.Sprintf("%s (p99 ≤ %s)", pct(r.waits.within(20e-6)), usBound(r.waits.quantileLE(0.99))))
	}
	if pooled.count() == 0 {
		return
	}
	p99 := pooled.quantileLE(0.99)
	res.metric("open_queue_wait_p99_le_us", p99*1e6)
	res.metric("open_queue_wait_within_20us", pooled.within(20e-6))
	res.note("The queue's own cost in the process at %.0f req/s: pacegate's queue wait (admission → release to the pool, its "+
		"`pacegate_queue_wait_seconds`, read from its admin API before and after each open round; no request waits for its pace or a "+
		"slot here, so a wait is the admission's checks and the request's setup (its rate-limit headers, deadline and sink), then the publish, "+
		"the delivery and the consumer's checks: the queue hop of `BenchmarkQueueHop` as the gateway lives it, with the setup before it), "+
		"%d requests in all: p99 ≤ %s (the bound of the histogram's bucket that holds it), %s within 20 µs; by round, %s.",
		float64(ohOpenRate), pooled.count(), usBound(p99), pct(pooled.within(20e-6)), strings.Join(rounds, ", "))
}
