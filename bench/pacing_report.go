package main

import (
	"fmt"
	"math"
	"time"
)

// pacingStats are the precision figures of one measured bucket.
type pacingStats struct {
	n                    int
	achieved, fit        float64 // (n-1)/span and least-squares slope, req/s
	errPct               float64 // |achieved-rate|/rate in %
	jitterP50, jitterP99 float64 // |gap - 1/rate| in ms
	longGaps             int     // gaps ≥ 1.5 intervals: a slot the pacer gave up
}

func pacingFigures(r pacingRun) pacingStats {
	ts := r.Releases
	st := pacingStats{n: len(ts), achieved: math.NaN(), fit: math.NaN(), errPct: math.NaN()}
	if len(ts) < 2 {
		return st
	}
	span := ts[len(ts)-1].Sub(ts[0]).Seconds()
	st.achieved = float64(len(ts)-1) / span
	st.errPct = 100 * math.Abs(st.achieved-r.Rate) / r.Rate
	xs, ys := make([]float64, len(ts)), make([]float64, len(ts))
	jit := make([]float64, 0, len(ts)-1)
	ideal := time.Duration(float64(time.Second) / r.Rate)
	for i, t := range ts {
		xs[i], ys[i] = t.Sub(ts[0]).Seconds(), float64(i)
		if i > 0 {
			gap := t.Sub(ts[i-1])
			jit = append(jit, math.Abs(ms(gap-ideal)))
			if gap >= ideal*3/2 {
				st.longGaps++
			}
		}
	}
	st.fit = slope(xs, ys)
	st.jitterP50, st.jitterP99 = Quantile(jit, 0.5), Quantile(jit, 0.99)
	return st
}

func pacingReport(e *env, res *ScenarioResult, runs []pacingRun) {
	t := Table{Title: "Achieved vs configured release rate", Header: []string{"background", "configured req/s", "releases",
		"achieved req/s", "least-squares req/s", "error", "jitter p50 (ms)", "jitter p99 (ms)", "gaps ≥ 1.5 intervals"}}
	var spread []pacingRun
	for _, r := range runs {
		st := pacingFigures(r)
		t.Rows = append(t.Rows, []string{r.background(), fmt.Sprint(r.Rate), fmt.Sprint(st.n), f3(st.achieved), f3(st.fit),
			fmt.Sprintf("%.3f %%", st.errPct), f3(st.jitterP50), f3(st.jitterP99), fmt.Sprint(st.longGaps)})
		suffix := ""
		if r.InStep {
			suffix = "_in_step"
		}
		res.metric(fmt.Sprintf("error_pct_%v%s", r.Rate, suffix), st.errPct)
		res.metric(fmt.Sprintf("jitter_p99_ms_%v%s", r.Rate, suffix), st.jitterP99)
		switch {
		case !r.InStep:
			spread = append(spread, r)
			pacingBar(res, fmt.Sprintf("rate error at %v req/s/bucket, 10,000 buckets", r.Rate), st)
		case r.Rate == pacingRates[len(pacingRates)-1]:
			pacingBar(res, fmt.Sprintf("rate error at %v req/s/bucket, 10,000 buckets whose releases come due together", r.Rate), st)
		}
	}
	res.Tables = append(res.Tables, t)
	res.note("Achieved rate = (releases−1) / (last−first release) over the measured window; jitter = |gap − 1/rate| between " +
		"consecutive releases. A gap of ≥ 1.5 intervals is a release that came late by more than half an interval. A release " +
		"late by more than the Pacer's tolerance (20 ms) restarts the bucket's grid from now (an idle key earns no burst), so " +
		"the slots it was late by are lost for good; within the tolerance they are made up back to back.")
	e.plot(res, "pacing-grid", "Release times vs the ideal grid (x = k/rate, y = actual time of release k; dashed = ideal), background spread", pacingGridPlot(spread).SVG())
	e.plot(res, "pacing-lag", "Lateness of each release against the ideal grid k/rate, per configured rate and background", pacingLagPlot(runs).SVG())
}

// pacingBar is the bar on one measured bucket's rate error.
func pacingBar(res *ScenarioResult, claim string, st pacingStats) {
	res.bar(claim, "< 1 %", fmt.Sprintf("%.3f %% (%s req/s; jitter p99 %s ms)", st.errPct, f3(st.achieved), f3(st.jitterP99)),
		st.errPct < 1)
}

// background names how r's background buckets were released.
func (r pacingRun) background() string {
	if r.InStep {
		return "in step"
	}
	return "spread"
}

func pacingGridPlot(runs []pacingRun) *Chart {
	c := &Chart{Title: "Pacing: release time vs ideal", XLabel: "ideal time k/rate (s)", YLabel: "actual release time (s)"}
	hi := 0.0
	for _, r := range runs {
		s := Series{Name: fmt.Sprintf("%v req/s", r.Rate), Scatter: true}
		step := max(1, len(r.Releases)/300)
		for i := 0; i < len(r.Releases); i += step {
			x, y := float64(i)/r.Rate, r.Releases[i].Sub(r.Releases[0]).Seconds()
			s.Points = append(s.Points, Point{x, y})
			hi = math.Max(hi, x)
		}
		c.Series = append(c.Series, s)
	}
	c.Series = append(c.Series, Series{Name: "ideal", Dashed: true, Points: []Point{{0, 0}, {hi, hi}}})
	return c
}

func pacingLagPlot(runs []pacingRun) *Chart {
	c := &Chart{Title: "Pacing: lateness against the ideal grid", XLabel: "time since first release (s)", YLabel: "actual − ideal (ms)"}
	for _, r := range runs {
		s := Series{Name: fmt.Sprintf("%v req/s, %s", r.Rate, r.background())}
		step := max(1, len(r.Releases)/400)
		for i := 0; i < len(r.Releases); i += step {
			at := r.Releases[i].Sub(r.Releases[0])
			s.Points = append(s.Points, Point{at.Seconds(), ms(at) - 1000*float64(i)/r.Rate})
		}
		c.Series = append(c.Series, s)
	}
	return c
}
