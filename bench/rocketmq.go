package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// rocketmqEndpoint is the broker the RocketMQ scenario uses, from
// PACEGATE_ROCKETMQ_ENDPOINT ("" when no broker is up).
func rocketmqEndpoint() string { return os.Getenv("PACEGATE_ROCKETMQ_ENDPOINT") }

const rmqHowTo = "PACEGATE_ROCKETMQ_ENDPOINT is not set. Start the broker with `bash scripts/rocketmq/rmq.sh fetch start init` " +
	"(proxy gRPC on 127.0.0.1:8081), then `PACEGATE_ROCKETMQ_ENDPOINT=127.0.0.1:8081 go run ./bench -quick -only rocketmq`; " +
	"stop it with `bash scripts/rocketmq/rmq.sh stop`."

// rmqRound is one backend's closed-loop run.
type rmqRound struct {
	backend  string
	ok, errs int
	tput     float64
	ttft     []float64
	cpu      map[string]float64 // CPU seconds per process during the round
}

func rmqMeasure(ctx context.Context, backend, url string, clients int, dur time.Duration) rmqRound {
	c := newClient(clients)
	body := chatBody(simModel, 16, true)
	r := rmqRound{backend: backend}
	var mu sync.Mutex
	cpu0 := cpuSeconds()
	_, el := closedLoop(ctx, clients, 1_000_000, dur, func(ctx context.Context, _ int) {
		tr := doStream(context.WithoutCancel(ctx), c, url, "sk-t0", "", body)
		mu.Lock()
		defer mu.Unlock()
		if tr.Err != nil || tr.Status != http.StatusOK {
			r.errs++
			return
		}
		r.ok++
		r.ttft = append(r.ttft, ms(tr.TTFT))
	})
	r.tput = float64(r.ok) / el.Seconds()
	r.cpu = map[string]float64{}
	for k, v := range cpuSeconds() {
		if v0, ok := cpu0[k]; ok {
			r.cpu[k] = v - v0
		}
	}
	return r
}

func runRocketMQ(ctx context.Context, e *env, res *ScenarioResult) error {
	clients, dur := 32, time.Duration(e.pick(10, 30))*time.Second
	res.Setup = fmt.Sprintf("%d closed-loop clients stream 16-token completions through the whole gateway (one tenant, pacing "+
		"off, pool max_concurrency 256) in front of vllmsim (TTFT 5ms, ITL 1ms), for %s per backend: the embedded queue, then the "+
		"real RocketMQ broker (LiteTopics, proxy gRPC) at PACEGATE_ROCKETMQ_ENDPOINT.", clients, dur)
	res.Baseline = "the embedded backend, same gateway, same sim, same run."
	if rocketmqEndpoint() == "" {
		res.Skipped = rmqHowTo
		return nil
	}
	sim, err := startSim(vllmsim.Config{TTFT: 5 * time.Millisecond, ITL: time.Millisecond, MaxNumSeqs: 256}, false)
	if err != nil {
		return err
	}
	defer sim.Close()
	var rounds []rmqRound
	for _, backend := range []string{"embedded", "rocketmq"} {
		gw, err := startPacegate(ctx, gwConfig{Upstream: sim.URL, MaxConcurrency: 256, Workers: 64, Tenants: 1, Backend: backend,
			Defaults: "{rpm: 0, tpm: 0, burst: 0, rate: .inf, backlog: 100000, max_wait: 30s}"})
		if err != nil {
			return fmt.Errorf("%s: %w", backend, err)
		}
		rounds = append(rounds, rmqMeasure(ctx, backend, chatURL(gw.URL()), clients, dur))
		gw.stop()
	}
	rmqReport(res, rounds)
	return nil
}

func rmqReport(res *ScenarioResult, rounds []rmqRound) {
	t := Table{Header: []string{"backend", "ok / errors", "responses/s", "TTFT p50 (ms)", "TTFT p99 (ms)"}}
	for _, r := range rounds {
		t.Rows = append(t.Rows, []string{r.backend, fmt.Sprintf("%d / %d", r.ok, r.errs), f1(r.tput),
			f3(Quantile(r.ttft, 0.5)), f3(Quantile(r.ttft, 0.99))})
		res.metric("rps_"+r.backend, r.tput)
	}
	res.Tables = append(res.Tables, t)
	// Where the time goes: CPU per response in each process. The gateway
	// and the load generator share this process; the broker's three JVMs
	// are read from rmq.sh's pid files.
	ct := Table{Title: "CPU per 1,000 responses (s)", Header: []string{"backend", "gateway+load (this process)", "proxy", "broker", "namesrv"}}
	for _, r := range rounds {
		row := []string{r.backend}
		for _, k := range ct.Header[1:] {
			v, ok := r.cpu[k]
			if !ok || r.ok == 0 {
				row = append(row, "–")
				continue
			}
			row = append(row, f2(v*1000/float64(r.ok)))
		}
		ct.Rows = append(ct.Rows, row)
	}
	res.Tables = append(res.Tables, ct)
	emb, rmq := rounds[0], rounds[1]
	added50 := Quantile(rmq.ttft, 0.5) - Quantile(emb.ttft, 0.5)
	added99 := Quantile(rmq.ttft, 0.99) - Quantile(emb.ttft, 0.99)
	res.metric("added_ttft_p50_ms", added50)
	res.note("RocketMQ vs embedded: %s× the requests/s; added TTFT p50 %s ms, p99 %s ms (no bar: reported only).",
		f2(ratio(rmq.tput, emb.tput)), f2(added50), f2(added99))
}
