package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

func runDisconnect(ctx context.Context, e *env, res *ScenarioResult) error {
	n := e.pick(20, 100)
	res.Setup = fmt.Sprintf("Through the whole gateway (embedded queue) in front of vllmsim (TTFT 20ms, ITL 20ms, MaxNumSeqs 1, pool "+
		"max_concurrency 8). %d samples per case, one at a time. Mid-stream: the client cancels after 5 content chunks; the time "+
		"is from its cancel to the sim noticing its own client (pacegate) left (vllmsim Abort.At). Queued at the upstream: a "+
		"blocker holds the sim's only running slot, the measured request is dispatched and waits in the sim's queue, then the "+
		"client cancels (Abort.Queued). Queued in pacegate: tenant `slow` is paced at 0.001 req/s; the measured request waits in "+
		"its bucket; the time is from the cancel to the bucket's backlog (consume.Queue) going back to 0, and the sim must "+
		"never see the request.", n)
	res.Baseline = "none needed: the bar is absolute (p99 < 100 ms); each sample's two timestamps are taken in this process."
	sim, err := startSim(vllmsim.Config{TTFT: 20 * time.Millisecond, ITL: 20 * time.Millisecond, MaxNumSeqs: 1}, false)
	if err != nil {
		return err
	}
	defer sim.Close()
	gw, err := startPacegate(ctx, gwConfig{Upstream: sim.URL, MaxConcurrency: 8, Workers: 64, Tenants: 1,
		Defaults:     "{rpm: 0, tpm: 0, burst: 0, rate: .inf, backlog: 1000, max_wait: 60s}",
		ExtraTenants: "  - {id: slow, keys: [\"sk-slow\"], limits: {rate: 0.001}}\n"})
	if err != nil {
		return err
	}
	defer gw.stop()
	sim.drainAborts()
	t := Table{Header: []string{"case", "samples", "missed", "p50 (ms)", "p99 (ms)", "max (ms)"}}
	add := func(name, claim string, lat []float64, missed int) {
		s := Summarize(lat)
		t.Rows = append(t.Rows, []string{name, fmt.Sprint(len(lat)), fmt.Sprint(missed), f3(s.P50), f3(s.P99), f3(s.Max)})
		res.metric("p99_ms_"+name, s.P99)
		if claim == "" {
			return
		}
		res.bar(claim, "p99 < 100 ms, none missed", fmt.Sprintf("p99 %s ms (%d/%d missed)", f3(s.P99), missed, len(lat)+missed),
			len(lat) > 0 && s.P99 < 100 && missed == 0)
	}
	lat, missed := dcMidStream(ctx, gw, sim, n)
	add("mid-stream", "disconnect → upstream abort, mid-stream", lat, missed)
	lat, missed = dcQueuedUpstream(ctx, gw, sim, n)
	add("queued-upstream", "disconnect → upstream abort, queued at vLLM", lat, missed)
	lat, missed, leaked := dcQueuedGateway(ctx, gw, sim, n)
	add("queued-gateway (backlog freed)", "", lat, missed)
	res.bar("disconnect while queued in pacegate: requests that still reached the upstream", "0 (nothing to abort)",
		fmt.Sprintf("%d of %d", leaked, n), leaked == 0)
	res.note("Queued in pacegate: %d of %d cancelled requests were still counted in the bucket's backlog %s after the "+
		"cancel. The gateway handler returns at once, but the message stays in its LiteTopic until the consumer's next "+
		"delivery of that bucket (after the pacer's Suspend), which drops it without taking a pacer slot or an upstream slot.",
		missed, n, dcWait)
	res.Tables = append(res.Tables, t)
	return nil
}
