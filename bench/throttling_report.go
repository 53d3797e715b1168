package main

import (
	"fmt"
)

// thStats are one gateway's figures.
type thStats struct {
	total, rejected, errs int
	frac                  float64
	ttft                  map[string][]float64 // class → TTFT ms of 200s
	byClass               map[string][2]int    // class → (requests, 429s)
}

func thFigures(r thRun) thStats {
	st := thStats{ttft: map[string][]float64{}, byClass: map[string][2]int{}}
	for _, o := range r.outcomes {
		st.total++
		c := st.byClass[o.class]
		c[0]++
		switch {
		case o.status == 429:
			st.rejected++
			c[1]++
		case o.err || o.status != 200:
			st.errs++
		default:
			st.ttft[o.class] = append(st.ttft[o.class], o.ttft)
		}
		st.byClass[o.class] = c
	}
	st.frac = ratio(float64(st.rejected), float64(st.total))
	return st
}

func thReport(e *env, res *ScenarioResult, runs []thRun, capacity int) {
	t := Table{Title: "Per gateway", Header: []string{"gateway", "requests", "429", "429 ratio", "429 steady / bursty",
		"other errors", "upstream peak (cap " + fmt.Sprint(capacity) + ")", "TTFT p50 / p99 steady (ms)", "TTFT p50 / p99 bursty (ms)"}}
	stats := map[string]thStats{}
	for _, r := range runs {
		st := thFigures(r)
		stats[r.name] = st
		s, b := st.byClass["steady"], st.byClass["bursty"]
		t.Rows = append(t.Rows, []string{r.name, fmt.Sprint(st.total), fmt.Sprint(st.rejected), pct(st.frac),
			fmt.Sprintf("%d / %d", s[1], b[1]), fmt.Sprint(st.errs), fmt.Sprint(r.peak),
			fmt.Sprintf("%s / %s", f1(Quantile(st.ttft["steady"], 0.5)), f1(Quantile(st.ttft["steady"], 0.99))),
			fmt.Sprintf("%s / %s", f1(Quantile(st.ttft["bursty"], 0.5)), f1(Quantile(st.ttft["bursty"], 0.99)))})
		res.metric("ratio_429_"+r.name, st.frac)
		res.metric("upstream_peak_"+r.name, float64(r.peak))
	}
	res.Tables = append(res.Tables, t)
	pg, base := runs[0], runs[1]
	pf, bf := stats[pg.name].frac, stats[base.name].frac
	res.bar("429 ratio, pacegate vs x/time/rate reject", "≤ 1/10 of baseline", fmt.Sprintf("%s vs %s", pct(pf), pct(bf)), pf <= bf/10)
	res.bar("upstream peak, pacegate vs baseline", "no higher", fmt.Sprintf("%d vs %d", pg.peak, base.peak), pg.peak <= base.peak)
	res.bar("pacegate upstream peak vs capacity", fmt.Sprintf("≤ %d", capacity), fmt.Sprint(pg.peak), pg.peak <= int64(capacity))
	res.bar("pacegate requests answered", "no errors", fmt.Sprintf("%d errors", stats[pg.name].errs), stats[pg.name].errs == 0)
	e.plot(res, "throttling-429", "Fraction of requests answered 429, per gateway and tenant class", thBars(runs, stats).SVG())
	e.plot(res, "throttling-ttft", "TTFT p99 per tenant class (ms; queue wait included for pacegate and nginx)", thTTFTBars(runs, stats).SVG())
	e.plot(res, "throttling-inflight", "Requests in flight at the upstream over the trace (capacity dashed)", thInflight(runs, capacity).SVG())
}

func thBars(runs []thRun, stats map[string]thStats) *BarChart {
	c := &BarChart{Title: "429 ratio", YLabel: "% of requests answered 429", Categories: []string{"all", "steady", "bursty"}}
	for _, r := range runs {
		st := stats[r.name]
		s, b := st.byClass["steady"], st.byClass["bursty"]
		c.Series = append(c.Series, BarSeries{Name: r.name, Values: []float64{100 * st.frac,
			100 * ratio(float64(s[1]), float64(s[0])), 100 * ratio(float64(b[1]), float64(b[0]))}})
	}
	return c
}

func thTTFTBars(runs []thRun, stats map[string]thStats) *BarChart {
	c := &BarChart{Title: "TTFT p99 of answered requests", YLabel: "TTFT p99 (ms)", Categories: []string{"steady", "bursty"}}
	for _, r := range runs {
		st := stats[r.name]
		c.Series = append(c.Series, BarSeries{Name: r.name, Values: []float64{Quantile(st.ttft["steady"], 0.99), Quantile(st.ttft["bursty"], 0.99)}})
	}
	return c
}

func thInflight(runs []thRun, capacity int) *Chart {
	c := &Chart{Title: "Upstream in-flight requests", XLabel: "time (s)", YLabel: "in flight at the sim"}
	hi := 0.0
	for _, r := range runs {
		c.Series = append(c.Series, Series{Name: r.name, Points: r.inflight})
		if n := len(r.inflight); n > 0 {
			hi = max(hi, r.inflight[n-1].X)
		}
	}
	c.Series = append(c.Series, Series{Name: "capacity", Dashed: true, Points: []Point{{0, float64(capacity)}, {hi, float64(capacity)}}})
	return c
}
