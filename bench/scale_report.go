package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

// scaleRow is one idle-bucket count's figures.
type scaleRow struct {
	n                         int
	pacerB, bucketsB, engineB float64 // heap bytes per idle bucket
	pacerNs, engineNs         float64 // dispatch cost
}

func runScale(ctx context.Context, e *env, res *ScenarioResult) error {
	counts := []int{10, 10_000, 1_000_000}
	res.Setup = "In-process, per layer that keeps per-bucket state: `policy.Pacer` (leaky-bucket slot), `consume.Queue`'s ledger " +
		"(the gateway's per-bucket queue tracker) and the embedded LiteTopic engine (an idle, empty LiteTopic kept until IdleTTL). " +
		"An idle bucket is one that served one request and is now empty. Memory = live-heap growth after GC divided by the count " +
		"(key strings excluded: tenant and model names are shared with the config). Dispatch cost with the idle buckets present: " +
		"one Pacer decision on a working set of 1,000 hot keys (median of 5×200k), and one engine message published, dispatched " +
		"and acked across 100 hot LiteTopics (wall time per message, 64 workers)."
	res.Baseline = "the same figures with 10 idle buckets, same run."
	var rows []scaleRow
	for _, n := range counts {
		r, err := scaleOne(ctx, n, e.pick(50_000, 200_000))
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	scaleReport(res, rows)
	q, err := queuedCost(ctx, 100_000)
	if err != nil {
		return err
	}
	res.Tables = append(res.Tables, Table{Title: "Memory with 100,000 queued requests (1,000 buckets, 133-byte chat body)",
		Header: []string{"layer", "bytes per queued request", "total MiB"}, Rows: q})
	return nil
}

func scaleOne(ctx context.Context, n, engineMsgs int) (scaleRow, error) {
	r := scaleRow{n: n}
	keys, hot := benchKeys("idle", n), benchKeys("hot", 1000)
	var p *policy.Pacer
	r.pacerB = float64(heapDelta(func() any { p = pacerIdle(keys); return p })) / float64(n)
	for _, k := range hot {
		p.AcquireOrSuspend(k, 1)
	}
	r.pacerNs = pacerDispatchNs(p, hot, 200_000)
	p = nil
	r.bucketsB = float64(heapDelta(func() any { return bucketsIdle(keys) })) / float64(n)
	var cnt atomic.Int64
	var eng *embedded.Engine
	var err error
	r.engineB = float64(heapDelta(func() any { eng, err = engineIdle(ctx, keys, &cnt); return eng })) / float64(n)
	if err == nil {
		r.engineNs, err = engineDispatchNs(ctx, eng, &cnt, hot[:100], engineMsgs)
	}
	if eng != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = eng.Close(closeCtx)
	}
	return r, err
}

func scaleReport(res *ScenarioResult, rows []scaleRow) {
	t := Table{Title: "Idle buckets", Header: []string{"idle buckets", "Pacer B/bucket", "Buckets B/bucket", "engine B/bucket",
		"total B/bucket", "Pacer decision (ns)", "engine msg (ns)"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{fmt.Sprint(r.n), f1(r.pacerB), f1(r.bucketsB), f1(r.engineB),
			f1(r.pacerB + r.bucketsB + r.engineB), f1(r.pacerNs), f1(r.engineNs)})
		res.metric(fmt.Sprintf("bytes_per_idle_bucket_%d", r.n), r.pacerB+r.bucketsB+r.engineB)
	}
	res.Tables = append(res.Tables, t)
	lo, hi := rows[0], rows[len(rows)-1]
	pr, er := ratio(hi.pacerNs, lo.pacerNs), ratio(hi.engineNs, lo.engineNs)
	res.metric("pacer_dispatch_ratio_1M_10", pr)
	res.metric("engine_dispatch_ratio_1M_10", er)
	res.bar("Pacer decision cost, 1M vs 10 idle buckets", "< 1.2×", fmt.Sprintf("%s× (%s vs %s ns)", f2(pr), f1(hi.pacerNs), f1(lo.pacerNs)), pr < 1.2)
	res.bar("engine dispatch cost, 1M vs 10 idle buckets", "< 1.2×", fmt.Sprintf("%s× (%s vs %s ns/msg)", f2(er), f1(hi.engineNs), f1(lo.engineNs)), er < 1.2)
	total := hi.pacerB + hi.bucketsB + hi.engineB
	res.bar("memory per idle bucket at 1M (Pacer + Buckets + engine)", "≤ 256 B", fmt.Sprintf("%s B (%s + %s + %s)",
		f1(total), f1(hi.pacerB), f1(hi.bucketsB), f1(hi.engineB)), total <= 256)
}

// queuedCost measures the heap held per queued request by the engine
// (message, body, properties) and by the gateway's bucket tracker.
func queuedCost(ctx context.Context, n int) ([][]string, error) {
	keys := benchKeys("q", 1000)
	body := chatBody(simModel, 256, true)
	var pubErr error
	engB := heapDelta(func() any {
		e := embedded.New(embedded.Config{MaxMessages: n, Logger: quietLogger})
		for i := range n {
			if err := e.Publish(ctx, message(keys[i%len(keys)].Tenant, fmt.Sprintf("req-%08d", i), body)); err != nil {
				pubErr = err
				break
			}
		}
		return e
	})
	bkB := heapDelta(func() any {
		q := consume.NewQueue(nopBackend{}, "")
		now := time.Now()
		for i := range n {
			_, _ = q.Submit(ctx, &consume.Request{ID: fmt.Sprintf("req-%08d", i), Key: keys[i%len(keys)], Submitted: now})
		}
		return q
	})
	row := func(name string, b int64) []string {
		return []string{name, f1(float64(b) / float64(n)), f1(float64(b) / (1 << 20))}
	}
	return [][]string{row("embedded engine (message + body + properties)", engB), row("consume.Queue (registry entry + ledger)", bkB),
		row("total", engB+bkB)}, pubErr
}
