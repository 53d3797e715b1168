package main

import (
	"fmt"
	"math"
)

// ohDiff is pacegate minus bare for one interleaved pair of rounds.
type ohDiff struct {
	tputRatio, ttftP50, ttftP99, chunkP50, chunkP99 float64
}

func ohDiffs(bare, pg []ohRound) []ohDiff {
	var ds []ohDiff
	for i := range min(len(bare), len(pg)) {
		b, p := bare[i], pg[i]
		ds = append(ds, ohDiff{
			tputRatio: ratio(p.tput, b.tput),
			ttftP50:   Quantile(p.ttft, 0.5) - Quantile(b.ttft, 0.5),
			ttftP99:   Quantile(p.ttft, 0.99) - Quantile(b.ttft, 0.99),
			chunkP50:  Quantile(p.chunkLat, 0.5) - Quantile(b.chunkLat, 0.5),
			chunkP99:  Quantile(p.chunkLat, 0.99) - Quantile(b.chunkLat, 0.99),
		})
	}
	return ds
}

func medianOf(ds []ohDiff, f func(ohDiff) float64) float64 {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = f(d)
	}
	return Median(xs)
}

func ohReport(e *env, res *ScenarioResult, bare, pg []ohRound) {
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
	res.bar("throughput vs bare proxy", "≥ 0.8×", f3(tr)+"×", tr >= 0.8)
	res.bar("added TTFT p50", "< 0.3 ms", f3(t50)+" ms", t50 < 0.3)
	res.bar("added TTFT p99", "< 2 ms", f3(t99)+" ms", t99 < 2)
	res.bar("added per-chunk latency p50", "< 50 µs", f1(c50)+" µs", c50 < 50)
	t := Table{Title: "Rounds (interleaved)", Header: []string{"round", "path", "ok / errors", "responses/s", "TTFT p50 (ms)",
		"TTFT p99 (ms)", "chunk latency p50 (µs)", "chunk latency p99 (µs)"}}
	for i := range min(len(bare), len(pg)) {
		for _, r := range []ohRound{bare[i], pg[i]} {
			t.Rows = append(t.Rows, []string{fmt.Sprint(i + 1), r.path, fmt.Sprintf("%d / %d", r.ok, r.errs), f1(r.tput),
				f3(Quantile(r.ttft, 0.5)), f3(Quantile(r.ttft, 0.99)), f1(Quantile(r.chunkLat, 0.5)), f1(Quantile(r.chunkLat, 0.99))})
		}
	}
	res.Tables = append(res.Tables, t)
	res.note("Added chunk latency p99 (median over rounds): %s µs. The sim's TTFT is %s, so TTFT figures are dominated by it; the "+
		"added figure is pacegate's p50/p99 minus the bare proxy's in the same round.", f1(c99), ohTTFT)
	e.plot(res, "overhead-ttft", "TTFT CDF, all rounds pooled: bare proxy vs pacegate", pooledCDF("TTFT", "TTFT (ms)", bare, pg,
		func(r ohRound) []float64 { return r.ttft }, false).SVG())
	e.plot(res, "overhead-chunk", "Per-chunk latency CDF (sim write → client receive), log10 µs", pooledCDF("Per-chunk latency",
		"log10 latency (µs)", bare, pg, func(r ohRound) []float64 { return r.chunkLat }, true).SVG())
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
