package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

const (
	ohClients = 64
	ohTokens  = 64
	ohTTFT    = 50 * time.Millisecond
	ohITL     = 10 * time.Millisecond
)

// ohStreamLen is a stream's length at the sim. The latency rounds spread
// their clients' first requests over it: clients that start together
// stay in step (every stream is as long), and their requests would
// reach the gateway as a burst of 64 every stream, their chunks as a
// burst of 64 every ITL, though each stream has a clock of its own. A
// request's latency would then be mostly its place in the queue of the
// burst (see bench/findings/overhead.md, "The latency rounds' bursts").
const ohStreamLen = ohTTFT + ohTokens*ohITL

// ohRound is one measured round through one path.
type ohRound struct {
	path     string
	ok, errs int
	tput     float64   // completed responses/s
	ttft     []float64 // ms
	chunkLat []float64 // µs, client receive − sim write, per content chunk
	// TTFT's legs, ms: client send → the request's arrival at the sim,
	// arrival → the sim's first content chunk write.
	toSim, atSim []float64
	// pathTTFT is each request's TTFT less its time at the sim (atSim), ms:
	// what the path adds to the first token. The added-TTFT bars compare
	// it, not TTFT itself: the sim's own time is alike for both paths in
	// expectation, not request by request.
	pathTTFT []float64
}

// ohMeasure drives 64 closed-loop streaming clients at url for dur (or
// maxReqs requests) and matches each chunk to the sim's write time.
func ohMeasure(ctx context.Context, sim *upstreamSim, path, url string, dur time.Duration, maxReqs int) ohRound {
	c := newClient(ohClients)
	body := chatBody(simModel, ohTokens, true)
	var mu sync.Mutex
	var traces []streamTrace
	var seq atomic.Int64
	sim.chunkTimes()
	n, el := closedLoopSpread(ctx, ohClients, maxReqs, dur, ohStreamLen, func(ctx context.Context, i int) {
		id := fmt.Sprintf("%s-%d-%d", path, time.Now().UnixNano(), seq.Add(1))
		tr := doStream(context.WithoutCancel(ctx), c, url, "sk-t0", id, body)
		mu.Lock()
		traces = append(traces, tr)
		mu.Unlock()
	})
	_ = n
	r := ohRound{path: path}
	writes := sim.chunkTimes()
	for _, tr := range traces {
		if tr.Err != nil || tr.Status != http.StatusOK || len(tr.Chunks) != ohTokens {
			r.errs++
			continue
		}
		r.ok++
		r.ttft = append(r.ttft, ms(tr.TTFT))
		if st := writes[tr.ReqID]; len(st.writes) == len(tr.Chunks) {
			for i, w := range st.writes {
				r.chunkLat = append(r.chunkLat, us(tr.Chunks[i].Sub(w)))
			}
			r.toSim = append(r.toSim, ms(st.arrived.Sub(tr.Start)))
			r.atSim = append(r.atSim, ms(st.writes[0].Sub(st.arrived)))
			r.pathTTFT = append(r.pathTTFT, ms(tr.TTFT)-r.atSim[len(r.atSim)-1])
		}
	}
	r.tput = float64(r.ok) / el.Seconds()
	return r
}

func runOverhead(ctx context.Context, e *env, res *ScenarioResult) error {
	rounds, dur := e.pick(6, 6), time.Duration(e.pick(6, 20))*time.Second
	warm := time.Duration(e.pick(2, 5)) * time.Second
	res.Setup = fmt.Sprintf("%d closed-loop clients (their first requests spread evenly over one stream's length at the sim, %s, "+
		"so that they do not run in step) stream %d-token chat completions (vllmsim: TTFT %s, ITL %s, MaxNumSeqs 256, "+
		"each stream on a clock of its own; the process rounds below have a sim of their own, with the engine's steps) "+
		"through the whole pacegate process (HTTP in, embedded queue with 64 workers, consumer, pool, SSE out; one tenant; "+
		"rpm/tpm/burst 0, rate .inf = pacing off; pool max_concurrency 256) and, alternately, through the bare proxy, each an OS "+
		"process of its own (the clients and the sim run in the harness). After a warm-up of %s per path, not counted, %d rounds "+
		"of %s per path, interleaved, each path first in half the pairs; figures are medians over rounds. Per-chunk latency = client receive time − the sim's "+
		"write time of the same chunk (both timestamps in the harness), matched by X-Request-Id.",
		ohClients, ohStreamLen, ohTokens, ohTTFT, ohITL, warm, rounds, dur)
	res.Baseline = "`net/http/httputil.ReverseProxy` (FlushInterval −1, same transport sizing) in front of the same sim, a process of " +
		"its own (the bench binary re-executed), same run."
	// The latency rounds' sim gives each stream a clock of its own: with
	// the engine's steps, 64 streams' chunks would leave the sim in one
	// burst, and either path's latency would be its queue of the burst
	// (see ohReport's note). The process rounds' sim has the steps.
	sim, err := startSim(vllmsim.Config{TTFT: ohTTFT, ITL: ohITL, MaxNumSeqs: 256, OwnClocks: true}, true)
	if err != nil {
		return err
	}
	defer sim.Close()
	bare, pg, err := ohLatencyRounds(ctx, sim, rounds, dur, warm)
	if err != nil {
		return err
	}
	ohReport(e, res, [2]ohRound{bare[0], pg[0]}, bare[1:], pg[1:])
	stepped, err := startSim(vllmsim.Config{TTFT: ohTTFT, ITL: ohITL, MaxNumSeqs: 256}, false)
	if err != nil {
		return err
	}
	defer stepped.Close()
	upstream := stepped.URL
	if v := os.Getenv(ohUpstreamEnv); v != "" {
		upstream = v
		res.note("The process rounds (CPU and 1,000 req/s) ran against a server started by hand (%s: %s), serving model %s; "+
			"the latency rounds above against the harness's sim.", ohUpstreamEnv, v, simModel)
	}
	cpuB, cpuP, openB, openP, err := runOverheadProcs(ctx, e, upstream)
	if err != nil {
		return fmt.Errorf("process rounds: %w", err)
	}
	ohProcReport(res, cpuB, cpuP, openB, openP)
	return nil
}

// ohUpstreamEnv names a server started by hand (another simulator, such
// as llm-d-inference-sim) for the process rounds: the latency rounds
// need the harness's sim, which stamps each chunk's write.
const ohUpstreamEnv = "PACEGATE_BENCH_OVERHEAD_UPSTREAM"

// ohLatencyRounds runs rounds interleaved latency rounds of dur, after a
// warm-up round of warm per path: each path's first requests after its
// process started are a fresh process's, which a gateway serving for
// hours is not. The warm-up rounds come first in bare and pg, so that
// the report shows them apart; the bare proxy goes first in the warm-up
// and every other pair after it, pacegate in the others (see inOrder).
// Both paths are processes of their own, as a deployment runs them: in
// the harness's runtime either would wait in the run queues of the
// clients and the sim that time it. The pool's cap is fixed and out of reach: this scenario
// measures what the gateway adds to a request, not how it learns the
// pool's room.
func ohLatencyRounds(ctx context.Context, sim *upstreamSim, rounds int, dur, warm time.Duration) (bare, pg []ohRound, err error) {
	procs, err := startOhProcs(ctx, sim.URL, gwConfig{MaxConcurrency: 256, Fixed: true, Workers: 64, Tenants: 1,
		Defaults: "{rpm: 0, tpm: 0, burst: 0, rate: .inf, backlog: 100000, max_wait: 30s}"})
	if err != nil {
		return nil, nil, err
	}
	defer procs.stop()
	for i := range rounds + 1 {
		if ctx.Err() != nil {
			break
		}
		d := dur
		if i == 0 {
			d = warm
		}
		inOrder(i%2 == 0, func() {
			bare = append(bare, ohMeasure(ctx, sim, "bare", chatURL(procs.bare.url), d, 100_000))
		}, func() {
			pg = append(pg, ohMeasure(ctx, sim, "pacegate", chatURL(procs.pg.url), d, 100_000))
		})
	}
	if len(pg) < 2 {
		return nil, nil, ctx.Err()
	}
	return bare, pg, nil
}
