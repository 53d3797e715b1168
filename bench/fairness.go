package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// The fairness scenario's pool: one simulated vLLM of fairSimSeqs
// sequences whose batch slows as it fills (fairLoadFactor at a full
// batch), every tenant paced at fairRate (so the pool, not the pacer, is
// the bottleneck). The baseline modes cap the upstream at fairCapacity,
// a guess below the server's room; the default learns the room.
const (
	fairCapacity         = 8
	fairSimSeqs          = 10
	fairLoadFactor       = 2
	fairTTFT             = 20 * time.Millisecond
	fairITL              = 5 * time.Millisecond
	fairRate             = 1000
	fairPrompt           = 1 // prompt tokens of chatBody's "hello" (the sim counts words)
	fairCompletionWeight = 2 // tokens served = prompt + 2 × completion
	fairMaxRequests      = 100000
	fairTail             = time.Second // load keeps running after the window so late requests get a first token
)

// fairModes are the configurations compared, baselines first: poll
// (fairness.mode: poll, the earlier design) and capped (fair, with
// max_concurrency fairCapacity fixed: an operator's guess at the room,
// the earlier default's setup), both with fixed_concurrency; then
// default: no fairness settings and no max_concurrency, the limit
// learned from the simulator's metrics.
var fairModes = []string{"poll", "capped", "default"}

// fairnessYAML is the fairness section of mode ("" for the default:
// nothing written).
func fairnessYAML(mode string) string {
	if mode == "default" {
		return ""
	}
	fm := "fair"
	if mode == "poll" {
		fm = "poll"
	}
	return fmt.Sprintf("fairness: {mode: %s}\n", fm)
}

// fairTenant is one tenant of a case: its config and its load.
type fairTenant struct {
	ID       string
	Weight   float64       // 0 = not written (the default, 1)
	Priority string        // "" = not written (the default, normal)
	Streams  int           // concurrent closed-loop streams
	Tokens   int           // max_tokens of each; the sim returns exactly that many
	Think    time.Duration // pause of each stream between the end of an answer and its next request
}

func (t fairTenant) weight() float64 {
	if t.Weight > 0 {
		return t.Weight
	}
	return 1
}

func (t fairTenant) priority() string {
	if t.Priority != "" {
		return t.Priority
	}
	return "normal"
}

func fairKey(id string) string { return "sk-" + id }

// fairPhase is one measured window of a case: which tenants load the
// pool, and how long before the window opens.
type fairPhase struct {
	Name   string
	Label  string   // for tables and plots
	Load   []string // tenant ids; the others stay idle
	Warm   time.Duration
	Window time.Duration
}

// fairCase is one case of the scenario: one gateway config, one or
// more phases run one after the other on it.
type fairCase struct {
	ID, Title string
	Tenants   []fairTenant
	Phases    []fairPhase
}

func (c fairCase) tenant(id string) fairTenant {
	for _, t := range c.Tenants {
		if t.ID == id {
			return t
		}
	}
	return fairTenant{ID: id}
}

// weightsTokens is the output length of the weights case. A share is
// settled in whole requests (a slot is held for one), and VTC bounds the
// gap between backlogged tenants by a few requests, not by a fraction of
// the window. With 256-token outputs (1.3 s each) the weight-1 tenant runs
// about 9 requests in the quick window and 17 in the full one, so one
// request is 6-11 % of its share and the figure measures the window, not
// the weights; 64-token outputs put one request at 2-4 %.
const weightsTokens = 64

// bandsWarm is the bands case's warm-up under saturation: longer than a
// 256-token request in a full batch (2.6 s here). A fresh gateway learns
// how the server slows from the first full batch (the high tenant alone
// runs only 2), and the batch then drains to the high band's
// max_slowdown as those requests end: the window measures that steady
// state, which a gateway that has seen its pool loaded is in.
const bandsWarm = 4 * time.Second

// fairCases are the scenario's cases, one per fairness claim; window is the measured window of a
// saturated phase (the light "alone" phases get the same). A slot is held
// for a whole request, so the all-backlogged cases warm up for longer than
// their longest request and measure over several of them: a window
// shorter than one 1024-token request (5.1 s here) would show which
// requests happened to hold the slots when it opened, not the share.
func fairCases(window time.Duration) []fairCase {
	long := max(window, 8*time.Second)
	light := func(id string) fairTenant { return fairTenant{ID: id, Streams: 2, Tokens: 32} }
	return []fairCase{
		{ID: "noisy", Title: "Noisy neighbour",
			Tenants: []fairTenant{{ID: "heavy", Streams: 32, Tokens: 256}, light("a"), light("b"), light("c")},
			Phases: []fairPhase{
				{Name: "alone", Label: "light tenants alone", Load: []string{"a", "b", "c"}, Warm: 500 * time.Millisecond, Window: window},
				{Name: "loaded", Label: "beside heavy", Load: []string{"heavy", "a", "b", "c"}, Warm: 1500 * time.Millisecond, Window: window},
			}},
		{ID: "lengths", Title: "Two backlogged tenants, outputs 64 and 512",
			Tenants: []fairTenant{{ID: "out64", Streams: 16, Tokens: 64}, {ID: "out512", Streams: 8, Tokens: 512}},
			Phases: []fairPhase{
				{Name: "loaded", Label: "both backlogged", Load: []string{"out64", "out512"}, Warm: 6 * time.Second, Window: long},
			}},
		{ID: "weights", Title: "Weights 1 : 2 : 4",
			Tenants: []fairTenant{{ID: "w1", Weight: 1, Streams: 12, Tokens: weightsTokens}, {ID: "w2", Weight: 2, Streams: 12, Tokens: weightsTokens}, {ID: "w4", Weight: 4, Streams: 12, Tokens: weightsTokens}},
			Phases: []fairPhase{
				{Name: "loaded", Label: "all backlogged", Load: []string{"w1", "w2", "w4"}, Warm: 3 * time.Second, Window: long},
			}},
		{ID: "bands", Title: "Priority bands",
			Tenants: []fairTenant{{ID: "hi", Priority: "high", Streams: 2, Tokens: 32},
				{ID: "norm", Priority: "normal", Streams: 16, Tokens: 256}, {ID: "lo", Priority: "low", Streams: 16, Tokens: 256}},
			Phases: []fairPhase{
				{Name: "alone", Label: "high tenant alone", Load: []string{"hi"}, Warm: 500 * time.Millisecond, Window: window},
				{Name: "loaded", Label: "beside saturating normal and low", Load: []string{"hi", "norm", "lo"}, Warm: bandsWarm, Window: window},
			}},
	}
}

// fairConfig is the gateway config of one case in mode (see fairModes):
// one upstream, capped at fairCapacity but in the default mode, every
// tenant at rate fairRate, plus the idle tenant t0 that answers the
// readiness probe.
func fairConfig(simURL, mode string, tenants []fairTenant) gwConfig {
	var b strings.Builder
	for _, t := range tenants {
		fmt.Fprintf(&b, "  - {id: %s, keys: [%q]", t.ID, fairKey(t.ID))
		if t.Weight > 0 {
			fmt.Fprintf(&b, ", weight: %g", t.Weight)
		}
		if t.Priority != "" {
			fmt.Fprintf(&b, ", priority: %s", t.Priority)
		}
		b.WriteString("}\n")
	}
	c := gwConfig{Upstream: simURL, Workers: 64, Tenants: 1, ExtraTenants: b.String(),
		Defaults: fmt.Sprintf("{rpm: 0, tpm: 0, burst: 0, rate: %d, backlog: 10000, max_wait: 30s}", fairRate)}
	if mode != "default" {
		c.MaxConcurrency, c.Fixed = fairCapacity, true
	}
	c.Extra = fairnessYAML(mode)
	return c
}

// tenantWindow is what one tenant got in a measured window [w0, w1).
type tenantWindow struct {
	Requests   int       // started in the window
	Completion int       // content chunks (completion tokens) received in the window
	Prompt     int       // prompt tokens of the requests whose first token arrived in the window
	TTFT       []float64 // ms, client side, of the requests started in the window
	NoFirst    int       // of those, how many had no first token when the load stopped (their wait counts in TTFT, a lower bound)
	Errors     int       // non-200 answers or streams broken before the load stopped
}

// served is prompt + completionWeight × completion tokens.
func (t tenantWindow) served(completionWeight float64) float64 {
	return float64(t.Prompt) + completionWeight*float64(t.Completion)
}

// windowStats sums traces over [w0, w1). stop is when the load was
// cancelled: a stream that ends in an error before it is broken, one
// that ends after it was cut by the harness.
func windowStats(traces []streamTrace, w0, w1, stop time.Time, prompt int) tenantWindow {
	in := func(t time.Time) bool { return !t.Before(w0) && t.Before(w1) }
	var tw tenantWindow
	for _, tr := range traces {
		if (tr.Status != 0 && tr.Status != 200) || (tr.Err != nil && tr.End.Before(stop)) {
			tw.Errors++
			continue
		}
		for i, c := range tr.Chunks {
			if in(c) {
				tw.Completion++
				if i == 0 {
					tw.Prompt += prompt
				}
			}
		}
		if !in(tr.Start) {
			continue
		}
		tw.Requests++
		if len(tr.Chunks) > 0 {
			tw.TTFT = append(tw.TTFT, ms(tr.TTFT))
		} else {
			tw.NoFirst++
			tw.TTFT = append(tw.TTFT, ms(tr.End.Sub(tr.Start)))
		}
	}
	return tw
}

// fairWindow is one phase of one case in one mode.
type fairWindow struct {
	Window   time.Duration
	Suspends float64 // capacity suspends counted during the window
	Tenants  map[string]tenantWindow
}

// fairDrive runs the phase's closed loops against url and measures its
// window; suspends reads the gateway's capacity-suspend counter.
func fairDrive(ctx context.Context, url string, fc fairCase, ph fairPhase, suspends func() float64) fairWindow {
	streams := 0
	for _, id := range ph.Load {
		streams += fc.tenant(id).Streams
	}
	c := newClient(streams)
	total := ph.Warm + ph.Window + fairTail
	var mu sync.Mutex
	traces := map[string][]streamTrace{}
	var wg sync.WaitGroup
	start := time.Now()
	for _, id := range ph.Load {
		t := fc.tenant(id)
		body := chatBody(simModel, t.Tokens, true)
		wg.Go(func() {
			closedLoop(ctx, t.Streams, fairMaxRequests, total, func(ctx context.Context, _ int) {
				tr := doStream(ctx, c, url, fairKey(t.ID), "", body)
				mu.Lock()
				traces[t.ID] = append(traces[t.ID], tr)
				mu.Unlock()
				sleepCtx(ctx, t.Think)
			})
		})
	}
	w0, w1 := start.Add(ph.Warm), start.Add(ph.Warm+ph.Window)
	sleepCtx(ctx, time.Until(w0))
	before := suspends()
	sleepCtx(ctx, time.Until(w1))
	after := suspends()
	wg.Wait()
	c.CloseIdleConnections()
	out := fairWindow{Window: ph.Window, Suspends: after - before, Tenants: map[string]tenantWindow{}}
	for _, id := range ph.Load {
		out.Tenants[id] = windowStats(traces[id], w0, w1, start.Add(total), fairPrompt)
	}
	return out
}

// counterSum is the sum of the counter name's series whose label has
// value, read from g (0 when there is none).
func counterSum(g prometheus.Gatherer, name, label, value string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// fairRunCase runs every phase of fc, in mode, on a fresh sim and a
// fresh gateway whose queue is backend ("embedded" or "rocketmq").
func fairRunCase(ctx context.Context, fc fairCase, mode, backend string) (map[string]fairWindow, error) {
	sim, err := startSim(vllmsim.Config{TTFT: fairTTFT, ITL: fairITL, MaxNumSeqs: fairSimSeqs, TimeFactorUnderLoad: fairLoadFactor}, false)
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	gc := fairConfig(sim.URL, mode, fc.Tenants)
	gc.Backend = backend
	g, err := startPacegate(ctx, gc)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	// A wake-up that did no work: in mode poll every capacity suspension
	// (each is a 25 ms retry); in mode fair a delivery of a bucket already
	// waiting for a slot (reason capacity_recheck). Joining the wait set
	// (reason capacity in mode fair) is one suspension per wait, not a poll.
	pollReason := "capacity"
	if mode != "poll" {
		pollReason = "capacity_recheck"
	}
	suspends := func() float64 {
		return counterSum(g.Metrics.Registry(), "pacegate_suspends_total", "reason", pollReason)
	}
	out := map[string]fairWindow{}
	for _, ph := range fc.Phases {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out[ph.Name] = fairDrive(ctx, chatURL(g.URL()), fc, ph, suspends)
		// Cancelled streams abort at the sim; let the next phase start on an idle pool.
		waitFor(ctx, 3*time.Second, func() bool { return sim.inflight.Load() == 0 })
	}
	return out, nil
}

// fairRuns are the measurements: mode → case id → phase name → window.
type fairRuns map[string]map[string]map[string]fairWindow

func runFairness(ctx context.Context, e *env, res *ScenarioResult) error {
	window := time.Duration(e.pick(3, 15)) * time.Second
	cases := fairCases(window)
	modes := fairModes
	res.Setup = fairSetup(cases, window)
	res.Baseline = "`fairness.mode: poll`, the earlier design (no free upstream slot: the bucket is suspended for a fixed 25 ms " +
		"and retried), and `capped` (fair, with `max_concurrency: 8` fixed, an operator's guess at the room), on the same cases in the same run, " +
		"each case on a fresh sim and gateway, poll, capped, then the default (no fairness settings, no max_concurrency)."
	runs := fairRuns{}
	for _, fc := range cases { // cases outer, modes inner: both modes of a case see the same machine load
		for _, mode := range modes {
			fmt.Fprintf(os.Stderr, "   %s, mode %s\n", fc.ID, mode)
			w, err := fairRunCase(ctx, fc, mode, "embedded")
			if err != nil {
				return fmt.Errorf("%s, mode %s: %w", fc.ID, mode, err)
			}
			if runs[mode] == nil {
				runs[mode] = map[string]map[string]fairWindow{}
			}
			runs[mode][fc.ID] = w
		}
	}
	fairReport(e, res, cases, runs)
	fairCostBar(res)
	if rocketmqEndpoint() != "" {
		return fairOnBroker(ctx, res, cases[0], runs)
	}
	return nil
}

// fairBrokerModes are the modes the noisy-neighbour case is repeated in
// on the RocketMQ broker.
var fairBrokerModes = []string{"poll", "default"}

// fairOnBroker repeats the noisy-neighbour case (fc) on the RocketMQ
// broker at PACEGATE_ROCKETMQ_ENDPOINT, in modes poll and fair, and
// reports it beside the embedded figures of the same run. A suspension
// there cannot be ended early: a waiting bucket is suspended for 50 ms
// and the slot granted to it is held until its next delivery.
func fairOnBroker(ctx context.Context, res *ScenarioResult, fc fairCase, embedded fairRuns) error {
	broker := fairRuns{}
	for _, mode := range fairBrokerModes {
		fmt.Fprintf(os.Stderr, "   %s, mode %s, on RocketMQ\n", fc.ID, mode)
		w, err := fairRunCase(ctx, fc, mode, "rocketmq")
		if err != nil {
			return fmt.Errorf("%s, mode %s, on RocketMQ: %w", fc.ID, mode, err)
		}
		broker[mode] = map[string]map[string]fairWindow{fc.ID: w}
	}
	fairBrokerReport(res, fc, embedded, broker)
	return nil
}

func fairSetup(cases []fairCase, window time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Whole gateway (embedded queue) in front of one vllmsim of %d sequences (`--max-num-seqs`; more wait in its FIFO) whose batch slows as it fills "+
		"(`--time-factor-under-load %d`: TTFT %s and ITL %s per token at one sequence, %d× at a full batch; exact output lengths). "+
		"Modes poll and capped cap the upstream at max_concurrency %d with fixed_concurrency; the default sets nothing and learns the room from the sim's /metrics. "+
		"Every tenant paced at rate %d (so pacing never binds), backlog 10000, max_wait 30s. "+
		"Each tenant runs closed-loop streams with no pause (`stream: true`; the gateway asks the upstream for usage). Figures come from a %s window "+
		"after a warm-up (load continues %s past it): tokens are the content chunks received in the window, TTFT is client-side "+
		"(queue wait included) of the requests started in it, tokens served = prompt + %d × completion tokens in the window, divided "+
		"by the tenant's weight for Jain's index. Capacity polls = the rise of `pacegate_suspends_total` over the "+
		"saturated windows, reason `capacity` in mode poll (each is a 25 ms retry) and `capacity_recheck` otherwise (a waiting bucket delivered again without a grant), "+
		"read from the gateway's metrics registry. Cases: ",
		fairSimSeqs, fairLoadFactor, fairTTFT, fairITL, fairLoadFactor, fairCapacity, fairRate, window, fairTail, fairCompletionWeight)
	for i, fc := range cases {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "**%s**: ", fc.Title)
		for j, t := range fc.Tenants {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "`%s` %d×%d tok", t.ID, t.Streams, t.Tokens)
			if t.Think > 0 {
				fmt.Fprintf(&b, " (pause %s)", t.Think)
			}
			if t.Weight > 0 {
				fmt.Fprintf(&b, " weight %g", t.Weight)
			}
			if t.Priority != "" {
				fmt.Fprintf(&b, " %s", t.Priority)
			}
		}
		var phases []string
		for _, ph := range fc.Phases {
			phases = append(phases, ph.Label)
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(phases, ", then "))
	}
	b.WriteString(".")
	return b.String()
}
