package main

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

// heapDelta returns the live heap growth caused by build, whose result
// is kept alive until after the second measurement.
func heapDelta(build func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// benchKeys returns n distinct bucket keys (built outside any
// measurement: tenant and model names are shared with the config).
func benchKeys(prefix string, n int) []policy.Key {
	ks := make([]policy.Key, n)
	for i := range ks {
		ks[i] = policy.Key{Tenant: fmt.Sprintf("%s%07d", prefix, i), Model: simModel}
	}
	return ks
}

// pacerIdle builds a pacer holding one idle entry per key.
func pacerIdle(keys []policy.Key) *policy.Pacer {
	p := policy.NewPacer(&rateTable{def: 1})
	for _, k := range keys {
		p.AcquireOrSuspend(k, 1)
	}
	return p
}

// pacerDispatchNs is the median cost of one AcquireOrSuspend on a
// working set of hot keys, in ns.
func pacerDispatchNs(p *policy.Pacer, hot []policy.Key, ops int) float64 {
	var reps []float64
	for range 5 {
		start := time.Now()
		for i := range ops {
			p.AcquireOrSuspend(hot[i%len(hot)], 1)
		}
		reps = append(reps, float64(time.Since(start).Nanoseconds())/float64(ops))
	}
	return Median(reps)
}

// bucketsIdle builds a queue whose ledger has seen one request per key
// come and go.
func bucketsIdle(keys []policy.Key) *consume.Queue {
	q := consume.NewQueue(nopBackend{}, "")
	now := time.Now()
	for i, k := range keys {
		p, err := q.Submit(context.Background(), &consume.Request{ID: fmt.Sprint(i), Key: k, Submitted: now})
		if err != nil {
			panic(err) // nopBackend never fails
		}
		q.Finish(p)
	}
	return q
}

// nopBackend accepts every message and delivers none.
type nopBackend struct{}

func (nopBackend) Publish(context.Context, *consume.Message) error { return nil }
func (nopBackend) Start(consume.Handler) error                     { return nil }
func (nopBackend) Close(context.Context) (consume.Leftover, error) {
	return consume.Leftover{}, nil
}
func (nopBackend) MinSuspend() time.Duration   { return time.Millisecond }
func (nopBackend) Ready(context.Context) error { return nil }

// engineIdle returns a started engine in which one message per key was
// published and acknowledged, so every key's LiteTopic is idle; the
// handler counts deliveries into n.
func engineIdle(ctx context.Context, keys []policy.Key, n *atomic.Int64) (*embedded.Engine, error) {
	e := embedded.New(embedded.Config{Workers: 64, MaxMessages: 1 << 22, MaxBytes: 1 << 32, Logger: quietLogger})
	if err := e.Start(func(context.Context, *consume.Delivery) consume.Result { n.Add(1); return consume.Success() }); err != nil {
		return nil, err
	}
	for i, k := range keys {
		if err := e.Publish(ctx, message(k.Tenant, fmt.Sprint(i), nil)); err != nil {
			return e, err
		}
	}
	if !waitFor(ctx, time.Minute, func() bool { return n.Load() >= int64(len(keys)) }) {
		return e, fmt.Errorf("engine: %d of %d idle-bucket messages delivered", n.Load(), len(keys))
	}
	return e, nil
}

// engineDispatchNs publishes msgs messages round-robin over hot keys
// and returns the wall time per delivered message (publish + dispatch +
// ack, 64 workers), in ns.
func engineDispatchNs(ctx context.Context, e *embedded.Engine, n *atomic.Int64, hot []policy.Key, msgs int) (float64, error) {
	base := n.Load()
	start := time.Now()
	for i := range msgs {
		if err := e.Publish(ctx, message(hot[i%len(hot)].Tenant, "h", nil)); err != nil {
			return 0, err
		}
	}
	if !waitFor(ctx, time.Minute, func() bool { return n.Load()-base >= int64(msgs) }) {
		return 0, fmt.Errorf("engine: hot messages not delivered")
	}
	return float64(time.Since(start).Nanoseconds()) / float64(msgs), nil
}
