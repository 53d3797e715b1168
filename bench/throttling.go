package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

const (
	thRate     = 2 // req/s per tenant
	thBurst    = 4 // token-bucket burst of the baseline
	thTokens   = 32
	thBacklog  = 1000
	thTTFT     = 50 * time.Millisecond
	thITL      = 5 * time.Millisecond
	thInterval = 50 * time.Millisecond // upstream in-flight sampling
)

// thOutcome is one request's answer.
type thOutcome struct {
	class  string
	status int
	ttft   float64 // ms, for 200s
	err    bool
}

// thRun is one gateway's run of the trace.
type thRun struct {
	name     string
	outcomes []thOutcome
	peak     int64
	inflight []Point // (s, in-flight at the sim)
}

func thSpec(e *env) traceSpec {
	return traceSpec{Tenants: e.pick(40, 200), Bursty: e.pick(4, 20), Rate: thRate, SteadyFrac: 0.5, BurstyBaseFrac: 0.25,
		BurstSize: 20, BurstLen: time.Second, BurstEvery: 15 * time.Second, Duration: time.Duration(e.pick(20, 60)) * time.Second, Seed: 42}
}

// thDrive replays the trace against url and samples the sim's in-flight
// count until every request has answered.
func thDrive(ctx context.Context, name, url string, sim *upstreamSim, evs []event) thRun {
	run := thRun{name: name}
	c := newClient(512)
	body := chatBody(simModel, thTokens, true)
	var mu sync.Mutex
	stopSample := make(chan struct{})
	sampled := make(chan []Point)
	go func() { sampled <- sampleInflight(sim, stopSample) }()
	sim.resetPeak()
	replay(ctx, evs, func(ctx context.Context, ev event) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		tr := doStream(rctx, c, url, fmt.Sprintf("sk-t%d", ev.Tenant), "", body)
		o := thOutcome{class: ev.Class, status: tr.Status, err: tr.Err != nil || (tr.Status == 200 && len(tr.Chunks) != thTokens)}
		if tr.Status == 200 {
			o.ttft = ms(tr.TTFT)
		}
		mu.Lock()
		run.outcomes = append(run.outcomes, o)
		mu.Unlock()
	})
	close(stopSample)
	run.inflight = <-sampled
	run.peak = sim.peak.Load()
	return run
}

func sampleInflight(sim *upstreamSim, stop <-chan struct{}) []Point {
	var pts []Point
	start := time.Now()
	t := time.NewTicker(thInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return pts
		case now := <-t.C:
			pts = append(pts, Point{now.Sub(start).Seconds(), float64(sim.inflight.Load())})
		}
	}
}

func runThrottling(ctx context.Context, e *env, res *ScenarioResult) error {
	spec, capacity := thSpec(e), e.pick(16, 64)
	evs := buildTrace(spec)
	res.Setup = fmt.Sprintf("Trace (seed %d, open loop): %d tenants, each with rate %d req/s; %d steady tenants send Poisson at %.0f%% of "+
		"their rate; %d bursty tenants send Poisson at %.0f%% plus a burst of %d requests within %s every %s (%d× their rate during "+
		"the burst; long-run average still under the rate); %s, %d requests in all. Each request streams %d tokens from a fresh "+
		"vllmsim (TTFT %s, ITL %s, MaxNumSeqs %d = the upstream capacity) per gateway. pacegate: rate %d, backlog %d, max_wait 30s, "+
		"no caps, pool max_concurrency %d. TTFT counts from the client's send (queue wait included).",
		spec.Seed, spec.Tenants, thRate, spec.Tenants-spec.Bursty, 100*spec.SteadyFrac, spec.Bursty, 100*spec.BurstyBaseFrac,
		spec.BurstSize, spec.BurstLen, spec.BurstEvery, int(float64(spec.BurstSize)/spec.BurstLen.Seconds()/thRate), spec.Duration,
		len(evs), thTokens, thTTFT, thITL, capacity, thRate, thBacklog, capacity)
	res.Baseline = fmt.Sprintf("(b) an immediate-reject gateway: one `golang.org/x/time/rate` token bucket per tenant+model "+
		"(rate %d/s, burst %d), 429 at once when empty, else a bare reverse proxy to its own identical sim (the sim queues what "+
		"exceeds MaxNumSeqs, like vLLM); (c) nginx `limit_req` (Debian nginx-light, zone keyed by the API key, rate %dr/s, "+
		"burst %d queued with delay, 429 beyond), when nginx is installed. Same trace, same run.", thRate, thBurst, thRate, thBacklog)
	var runs []thRun
	for _, gw := range thGateways(capacity, spec.Tenants) {
		if ctx.Err() != nil {
			break
		}
		r, err := thOne(ctx, gw, capacity, evs)
		if err != nil {
			res.note("%s: %v", gw.name, err)
			continue
		}
		runs = append(runs, r)
	}
	if len(runs) < 2 {
		return fmt.Errorf("throttling: only %d gateway runs completed", len(runs))
	}
	thReport(e, res, runs, capacity)
	return nil
}

// thGateway starts one gateway in front of a sim URL.
type thGateway struct {
	name  string
	start func(ctx context.Context, simURL string) (url string, stop func(), err error)
}

func thGateways(capacity, tenants int) []thGateway {
	keys := map[string]string{}
	for i := range tenants {
		keys[fmt.Sprintf("sk-t%d", i)] = fmt.Sprintf("t%d", i)
	}
	gws := []thGateway{
		{"pacegate", func(ctx context.Context, simURL string) (string, func(), error) {
			g, err := startPacegate(ctx, gwConfig{Upstream: simURL, MaxConcurrency: capacity, Workers: 64, Tenants: tenants,
				Defaults: fmt.Sprintf("{rpm: 0, tpm: 0, burst: 0, rate: %d, backlog: %d, max_wait: 30s}", thRate, thBacklog)})
			if err != nil {
				return "", nil, err
			}
			return g.URL(), g.stop, nil
		}},
		{"x/time/rate reject", func(_ context.Context, simURL string) (string, func(), error) {
			return serve(newRejectGateway(simURL, keys, thRate, thBurst, 512))
		}},
	}
	if bin := nginxBinary(); bin != "" {
		gws = append(gws, thGateway{"nginx limit_req", func(_ context.Context, simURL string) (string, func(), error) {
			return startNginx(bin, strings.TrimPrefix(simURL, "http://"), thRate, thBacklog)
		}})
	}
	return gws
}

func thOne(ctx context.Context, gw thGateway, capacity int, evs []event) (thRun, error) {
	sim, err := startSim(vllmsim.Config{TTFT: thTTFT, ITL: thITL, MaxNumSeqs: capacity}, false)
	if err != nil {
		return thRun{}, err
	}
	defer sim.Close()
	url, stop, err := gw.start(ctx, sim.URL)
	if err != nil {
		return thRun{}, err
	}
	defer stop()
	return thDrive(ctx, gw.name, chatURL(url), sim, evs), nil
}
