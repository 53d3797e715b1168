package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pacegate/pacegate/consume/upstream"
)

func runPrefix(ctx context.Context, e *env, res *ScenarioResult) error {
	d := time.Duration(e.pick(20, 45)) * time.Second
	replicas := fmt.Sprintf("%d replicas of vllmsim with a prefix cache of %d tokens each (16-token blocks, LRU), TTFT 10 ms + 0.2 ms "+
		"per uncached prompt token, ITL 5 ms, max-num-seqs 16, time factor under load 2", pfxReplicas, pfxCacheTokens)
	if v := os.Getenv(pfxUpstreamsEnv); v != "" {
		replicas = fmt.Sprintf("%d replicas started by hand (%s: %s)", pfxReplicas, pfxUpstreamsEnv, v)
	}
	res.Setup = fmt.Sprintf("%s. %d concurrent multi-turn conversations "+
		"(one tenant each), each with its own %d-word system prompt, %d turns of %d new words, %d output tokens on average "+
		"(16 to 48: answers of one length put the closed loop in lockstep), streamed; a "+
		"conversation that ends starts a new one. %s per case. pacegate at its defaults (no max_concurrency, no fairness "+
		"settings) with routing.policy as named; the hit ratio is cached over prompt tokens as the replicas reported them in usage. "+
		"The cases with pauses wait a random time up to %v before each follow-up turn, as a client running a tool or a reader "+
		"would: without them, least outstanding often sends a turn back to the replica the conversation just left, the one "+
		"whose slot its last turn freed.",
		replicas, pfxWorkers, pfxSystemWords, pfxTurns, pfxTurnWords, pfxMaxTokens, d, pfxPauseMax)
	res.Baseline = "the perfect partition: each replica serves its own 8 conversations, sent to it directly (no gateway); and " +
		"routing.policy least_outstanding, pacegate's routing before this scenario, in the same run."
	cases := []struct {
		name, policy        string
		shared, kill, pause bool
	}{
		{"partition", "", false, false, false},
		{"least_outstanding", "least_outstanding", false, false, false},
		{"prefix", "prefix", false, false, false},
		{"prefix, shared preamble", "prefix", true, false, false},
		{"prefix, a replica drained midway", "prefix", false, true, false},
		{"prefix, a replica crashed midway", "prefix", false, true, false},
		{"partition, pauses", "", false, false, true},
		{"least_outstanding, pauses", "least_outstanding", false, false, true},
		{"prefix, pauses", "prefix", false, false, true},
	}
	results := map[string]*pfxResult{}
	for i, c := range cases {
		r, skipped, err := pfxCase(ctx, c.name, uint64(i+1), d, c.policy, c.shared, c.kill, c.pause)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if skipped != "" {
			res.note("%s: skipped (%s)", c.name, skipped)
			continue
		}
		results[c.name] = r
	}
	pfxReport(e, res, results)
	pfxCostBar(ctx, res)
	return nil
}

// pfxCase runs one case on fresh replicas (or the external ones).
func pfxCase(ctx context.Context, name string, salt uint64, d time.Duration, policy string, shared, kill, pause bool) (*pfxResult, string, error) {
	urls, sims, external, err := pfxUpstreams()
	if err != nil {
		return nil, "", err
	}
	defer func() {
		for _, s := range sims {
			s.Close()
		}
	}()
	if kill && external {
		return nil, "cannot kill a replica started outside the harness", nil
	}
	if policy == "" {
		return pfxRun(ctx, name, salt, d, shared, pause, func(w int) string { return chatURL(urls[w%pfxReplicas]) }, nil), "", nil
	}
	gw, err := pfxGateway(ctx, urls, policy)
	if err != nil {
		return nil, "", err
	}
	defer gw.stop()
	before, beforeBy := routedPerUpstream(gw)
	var midway func()
	switch {
	case kill && strings.Contains(name, "drained"):
		midway = func() { go sims[0].drain() } // stops taking requests, finishes its streams
	case kill:
		midway = func() { sims[0].Close() } // cuts its streams too
	}
	r := pfxRun(ctx, name, salt, d, shared, pause, func(int) string { return chatURL(gw.URL()) }, midway)
	after, afterBy := routedPerUpstream(gw)
	for i := range after {
		r.perUp = append(r.perUp, after[i]-before[i])
	}
	r.decisions = map[string]uint64{}
	for d, n := range afterBy {
		r.decisions[d] = n - beforeBy[d]
	}
	return r, "", nil
}

// routedPerUpstream is the requests the gateway has routed to each
// upstream, and to all of them by routing decision.
func routedPerUpstream(gw *pacegate) (perUp []float64, byDecision map[string]uint64) {
	byDecision = map[string]uint64{}
	for _, u := range gw.Pool.Stats() {
		n := 0.0
		for d, v := range u.Routed {
			n += float64(v)
			byDecision[d] += v
		}
		perUp = append(perUp, n)
	}
	return perUp, byDecision
}

// decisionsCell is a case's routing decisions, prefix / miss / load.
func decisionsCell(r *pfxResult) string {
	if r.decisions == nil {
		return "–"
	}
	return fmt.Sprintf("%d / %d / %d", r.decisions[upstream.DecisionPrefix], r.decisions[upstream.DecisionMiss], r.decisions[upstream.DecisionLoad])
}

func pfxReport(e *env, res *ScenarioResult, rs map[string]*pfxResult) {
	t := Table{Title: "per case", Header: []string{"case", "completed", "errors", "hit ratio", "follow-up TTFT p50 (ms)", "p99 (ms)", "follow-ups prefilled again", "requests per replica (max/mean)", "decisions: prefix / miss / load"}}
	for _, name := range []string{"partition", "least_outstanding", "prefix", "prefix, shared preamble", "prefix, a replica drained midway", "prefix, a replica crashed midway",
		"partition, pauses", "least_outstanding, pauses", "prefix, pauses"} {
		r, ok := rs[name]
		if !ok {
			continue
		}
		s := r.followUpTTFT()
		spread := "–"
		if slices.Max(append(r.perUp, 0)) > 0 {
			spread = fmt.Sprintf("%v (%s)", r.perUp, f2(maxOverMean(r.perUp)))
		}
		t.Rows = append(t.Rows, []string{name, fmt.Sprint(r.completed), fmt.Sprint(r.errors), f3(r.hitRatio()), f1(s.P50), f1(s.P99), fmt.Sprint(r.refilled()), spread, decisionsCell(r)})
		res.metric("hit_ratio_"+name, r.hitRatio())
		res.metric("followup_ttft_p99_ms_"+name, s.P99)
		res.metric("completed_"+name, float64(r.completed))
		res.metric("refilled_"+name, float64(r.refilled()))
	}
	res.Tables = append(res.Tables, t)
	res.note("Decisions, counted by the gateway: prefix = to the replica predicted to hold the longest prefix of the prompt; " +
		"miss = no replica held any of it (a conversation's first turn), least loaded; load = a replica holding more of it was " +
		"skipped, over the load bound or at its limit (a follow-up that prefills its prefix again elsewhere). " +
		"A follow-up prefilled again is one whose replica reported less than half of its prompt cached.")
	pfxBars(res, "", rs["partition"], rs["least_outstanding"], rs["prefix"])
	pfxBars(res, fmt.Sprintf(", a pause of up to %v before each follow-up", pfxPauseMax),
		rs["partition, pauses"], rs["least_outstanding, pauses"], rs["prefix, pauses"])
	if sh := rs["prefix, shared preamble"]; sh != nil {
		m := maxOverMean(sh.perUp)
		res.bar("one preamble shared by every conversation: requests per replica", "max/mean ≤ 1.3", fmt.Sprintf("%s (%v)", f2(m), sh.perUp), m <= 1.3)
	}
	if k := rs["prefix, a replica drained midway"]; k != nil {
		res.bar("a replica leaving mid-run (drained: no new requests, its streams finish): client-visible errors", "0",
			fmt.Sprintf("%d of %d", k.errors, k.errors+k.completed), k.errors == 0)
	}
	if k := rs["prefix, a replica crashed midway"]; k != nil {
		res.note("A replica crashed mid-run (its listener and every connection cut at once): %d of %d requests failed, the "+
			"streams it was serving: %d after their first token, the others after its response headers (vLLM and the "+
			"simulator answer the headers at once). A response that has started cannot move to another replica (a stream's "+
			"tokens would come from another sampling), so each ends with an error event; requests sent after the crash were "+
			"retried before their first byte or routed elsewhere, and the conversations re-homed.", k.errors, k.errors+k.completed, k.midStream)
	}
	pfxPlot(e, res, rs)
}

// pfxBars adds the bars that compare prefix routing with the perfect
// partition and least outstanding, on one workload (named by suffix).
func pfxBars(res *ScenarioResult, suffix string, part, lo, pfx *pfxResult) {
	if part == nil || lo == nil || pfx == nil {
		return
	}
	hr := ratio(pfx.hitRatio(), part.hitRatio())
	res.bar("prefix-cache hit ratio vs the perfect partition"+suffix, "≥ 0.9×",
		fmt.Sprintf("%s× (%s vs %s; least outstanding %s)", f2(hr), f3(pfx.hitRatio()), f3(part.hitRatio()), f3(lo.hitRatio())), hr >= 0.9)
	tt := ratio(pfx.followUpTTFT().P99, part.followUpTTFT().P99)
	res.bar("follow-up turns' TTFT p99 vs the perfect partition"+suffix, "≤ 1.5×",
		fmt.Sprintf("%s× (%s vs %s ms; least outstanding %s ms)", f2(tt), f1(pfx.followUpTTFT().P99), f1(part.followUpTTFT().P99), f1(lo.followUpTTFT().P99)), tt <= 1.5)
	cr := ratio(float64(pfx.completed), float64(lo.completed))
	res.bar("completed requests vs least outstanding"+suffix, "≥ 1.3×",
		fmt.Sprintf("%s× (%d vs %d; the perfect partition %d)", f2(cr), pfx.completed, lo.completed, part.completed), cr >= 1.3)
}

func maxOverMean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return ratio(slices.Max(xs), sum/float64(len(xs)))
}

// pfxCostBar runs the routing decision's Go benchmark (64 upstreams,
// 100,000 indexed blocks) in a child `go test` and takes its median.
func pfxCostBar(ctx context.Context, res *ScenarioResult) {
	out, err := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkRoute(Decision|Record)$", "-benchtime", "20000x",
		"-count", "5", "./consume/upstream/").CombinedOutput()
	if err != nil {
		res.note("routing decision benchmark failed: %v\n%s", err, out)
		return
	}
	ns := func(name string) float64 {
		re := regexp.MustCompile(name + `-\d+\s+\d+\s+([\d.]+) ns/op`)
		var xs []float64
		for _, m := range re.FindAllSubmatch(out, -1) {
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			xs = append(xs, v)
		}
		return Median(xs)
	}
	dec, rec := ns("BenchmarkRouteDecision"), ns("BenchmarkRouteRecord")
	res.metric("route_decision_ns", dec)
	res.metric("route_record_ns", rec)
	res.bar("cost: a routing decision at 64 replicas and 100,000 indexed blocks (a 64-block prompt)", "< 2 µs",
		fmt.Sprintf("%.0f ns (median of 5, go test -bench BenchmarkRouteDecision ./consume/upstream/); recording the prompt after it: %.0f ns", dec, rec),
		dec < 2000)
}

func pfxPlot(e *env, res *ScenarioResult, rs map[string]*pfxResult) {
	c := &BarChart{Title: "Multi-turn conversations on 4 replicas with a prefix cache", YLabel: "ratio to the perfect partition",
		Categories: []string{"prefix-cache hit ratio", "follow-up TTFT p99", "completed requests"}}
	part := rs["partition"]
	for _, n := range []string{"partition", "least_outstanding", "prefix"} {
		r := rs[n]
		c.Series = append(c.Series, BarSeries{Name: n, Values: []float64{ratio(r.hitRatio(), part.hitRatio()),
			ratio(r.followUpTTFT().P99, part.followUpTTFT().P99), ratio(float64(r.completed), float64(part.completed))}})
	}
	e.plot(res, "prefix", "prefix routing vs least outstanding, each as a ratio to the perfect partition (1 = as good)", c.SVG())
}
