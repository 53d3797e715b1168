package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

// rateTable is a policy.RateSource with fixed per-key rates.
type rateTable struct {
	rates map[policy.Key]float64
	def   float64
}

// BaseRate implements [policy.RateSource].
func (t *rateTable) BaseRate(k policy.Key) (float64, bool) {
	if r, ok := t.rates[k]; ok {
		return r, false
	}
	return t.def, false
}

// releaseObserver timestamps the consumer's releases of measured
// buckets.
type releaseObserver struct{ log *releaseLog }

func (o releaseObserver) Released(k policy.Key, _ time.Duration)    { o.log.add(k.Tenant, time.Now()) }
func (releaseObserver) Suspended(policy.Key, time.Duration, string) {}
func (releaseObserver) Dropped(policy.Key, string)                  {}
func (releaseObserver) Panicked(policy.Key)                         {}

// nullUpstreams is an upstream pool with unlimited capacity whose calls
// return at once: the trivial upstream of the pacing scenario.
type nullUpstreams struct{}

func (nullUpstreams) TryAcquire(string) (consume.Slot, bool)         { return nullSlot{}, true }
func (nullUpstreams) TryAcquireHeadroom(string) (consume.Slot, bool) { return nullSlot{}, true }
func (nullUpstreams) OnFree(func([]string))                          {}
func (nullUpstreams) Free(string) (int, int)                         { return nullSlots, nullSlots }

// nullSlots is the pool's size as nullUpstreams reports it: out of
// reach, as its TryAcquire is. A pool of 1 (what it said before) made
// the fair-share gate keep that one slot for the thousands of buckets
// owed it, and paced every bucket at the gate's turn, about 100/s.
const nullSlots = 1 << 20

type nullSlot struct{}

func (nullSlot) Do(context.Context, *consume.Request, consume.Emitter) error {
	return nil
}
func (nullSlot) Release() {}

// pacedQueue is the real consumer path without HTTP: the embedded engine,
// consume.Queue, consume.Consumer and policy.Pacer.
type pacedQueue struct {
	eng      *embedded.Engine
	q        *consume.Queue
	consumer *consume.Consumer
	clients  context.Context // every pending request's context
	cancel   context.CancelFunc
}

func newPacedQueue(src policy.RateSource, obs consume.Observer, workers int) *pacedQueue {
	q := &pacedQueue{}
	q.eng = embedded.New(embedded.Config{Workers: workers, MaxMessages: 1 << 21, Logger: quietLogger})
	q.q = consume.NewQueue(q.eng, "")
	q.consumer = consume.NewConsumer(consume.ConsumerConfig{Queue: q.q, Pacer: policy.NewPacer(src),
		Upstreams: nullUpstreams{}, Observer: obs, Logger: quietLogger})
	q.clients, q.cancel = context.WithCancel(context.Background())
	return q
}

// publish submits a request as the gateway does.
func (q *pacedQueue) publish(ctx context.Context, tenant, id string, body []byte) error {
	_, err := q.q.Submit(q.clients, &consume.Request{ID: id, Key: policy.Key{Tenant: tenant, Model: simModel},
		Path: "/v1/chat/completions", Body: body, Stream: true, Band: 1, Weight: 1, Submitted: time.Now()})
	return err
}

func (q *pacedQueue) start() error { return q.eng.Start(q.consumer.Handle) }

func (q *pacedQueue) close() {
	q.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = q.eng.Close(ctx)
	_ = q.consumer.Close(ctx)
}

// message builds a queue message for tenant.
func message(tenant, id string, body []byte) *consume.Message {
	return &consume.Message{ID: id, LiteTopic: "bench-" + tenant, Body: body, Properties: map[string]string{
		consume.PropTenant: tenant, consume.PropModel: simModel,
	}}
}

// releaseLog collects release times per measured tenant.
type releaseLog struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

// of returns a copy of tenant's release times so far.
func (l *releaseLog) of(tenant string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.times[tenant])
}

func (l *releaseLog) add(tenant string, at time.Time) {
	l.mu.Lock()
	if ts, ok := l.times[tenant]; ok {
		l.times[tenant] = append(ts, at)
	}
	l.mu.Unlock()
}

// pacingRun is one measured bucket's outcome.
type pacingRun struct {
	Rate     float64
	InStep   bool // the background buckets' releases came due together (see pacingMeasure)
	Releases []time.Time
}

var pacingRates = []float64{1, 10, 100, 1000}

func runPacing(ctx context.Context, e *env, res *ScenarioResult) error {
	dur := time.Duration(e.pick(10, 30)) * time.Second
	const idle = 10000
	bgRate := 0.25
	res.Setup = fmt.Sprintf("Path: pacegate's queue side without HTTP: the embedded LiteTopic engine (`consume/embedded`, 64 workers), the real "+
		"`consume.Consumer` (capacity check, `policy.Pacer` AcquireOrSuspend, Suspend or a short in-handler wait below the engine's "+
		"MinSuspend), with an upstream of unlimited capacity that answers at once; a release is timestamped by the consumer's "+
		"Observer.Released. Not the whole gateway: 10,000 HTTP clients would measure the load generator, not the pacer. "+
		"%d background buckets at %.2f req/s each (%.0f releases/s in total, every one with a backlog all run long) plus one "+
		"measured bucket per rate (%v req/s), whose backlogs are queued up front; measured for %s. The background buckets' first "+
		"requests arrive spread over one of their intervals (%s), and the measuring starts after it: releases spread evenly, as "+
		"tenants' are. A second run queues every background backlog up front, so that all %d buckets come due together, once an "+
		"interval: releases in step.", idle, bgRate, idle*bgRate, pacingRates, dur, bgPeriod(bgRate), idle)
	res.Baseline = "the configured rate (ideal release grid k/rate)."
	var runs []pacingRun
	for _, inStep := range []bool{false, true} {
		rs, err := pacingMeasure(ctx, dur, idle, bgRate, inStep)
		if err != nil {
			return err
		}
		runs = append(runs, rs...)
	}
	pacingReport(e, res, runs)
	return nil
}

// bgPeriod is a background bucket's interval between two releases.
func bgPeriod(rate float64) time.Duration { return time.Duration(float64(time.Second) / rate) }

// pacingMeasure runs the engine with the measured buckets' backlogs
// queued up front and returns their release times over dur. With inStep,
// every background backlog is queued up front too: each background
// bucket's first release comes at the start, and its next ones on the
// same grid, so all of them come due together once an interval. Without
// it, background bucket i's backlog arrives i/idle of an interval after
// the start, and dur is measured after one interval: releases spread
// evenly over time.
func pacingMeasure(ctx context.Context, dur time.Duration, idle int, bgRate float64, inStep bool) ([]pacingRun, error) {
	src := &rateTable{rates: map[policy.Key]float64{}, def: bgRate}
	log := &releaseLog{times: map[string][]time.Time{}}
	lead := bgPeriod(bgRate) // how long the background takes to spread
	if inStep {
		lead = 0
	}
	for _, r := range pacingRates {
		name := measuredTenant(r)
		src.rates[policy.Key{Tenant: name, Model: simModel}] = r
		log.times[name] = make([]time.Time, 0, int(r*(lead+dur).Seconds())+16)
	}
	q := newPacedQueue(src, releaseObserver{log}, 64)
	defer q.close()
	bg := backlog{q: q, body: chatBody(simModel, 16, true), perBucket: int(math.Ceil(bgRate*(lead+dur).Seconds())) + 2}
	for _, r := range pacingRates {
		for j := range int(r*(lead+dur).Seconds()*1.2) + 4 {
			if err := q.publish(ctx, measuredTenant(r), fmt.Sprintf("m%v-%d", r, j), bg.body); err != nil {
				return nil, err
			}
		}
	}
	if inStep {
		if err := bg.all(ctx, idle); err != nil {
			return nil, err
		}
	}
	if err := q.start(); err != nil {
		return nil, err
	}
	from := time.Now().Add(lead)
	if !inStep {
		if err := bg.spread(ctx, idle, lead); err != nil {
			return nil, err
		}
	}
	sleepCtx(ctx, time.Until(from.Add(dur)))
	var runs []pacingRun
	for _, r := range pacingRates {
		runs = append(runs, pacingRun{Rate: r, InStep: inStep, Releases: within(log.of(measuredTenant(r)), from, dur)})
	}
	return runs, ctx.Err()
}

// backlog queues the background buckets' requests.
type backlog struct {
	q         *pacedQueue
	body      []byte
	perBucket int // requests queued in each background bucket
}

// all queues every background bucket's backlog at once.
func (b backlog) all(ctx context.Context, idle int) error {
	for i := range idle {
		if err := b.bucket(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// spread queues background bucket i's backlog i/idle of lead after now.
func (b backlog) spread(ctx context.Context, idle int, lead time.Duration) error {
	start := time.Now()
	for i := range idle {
		sleepCtx(ctx, time.Until(start.Add(lead*time.Duration(i)/time.Duration(idle))))
		if err := b.bucket(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// bucket queues background bucket i's whole backlog.
func (b backlog) bucket(ctx context.Context, i int) error {
	for j := range b.perBucket {
		if err := b.q.publish(ctx, fmt.Sprintf("bg%05d", i), fmt.Sprintf("bg%d-%d", i, j), b.body); err != nil {
			return err
		}
	}
	return nil
}

func measuredTenant(rate float64) string { return fmt.Sprintf("rate%v", rate) }

// within keeps the releases in [from, from+dur).
func within(ts []time.Time, from time.Time, dur time.Duration) []time.Time {
	lo, _ := slices.BinarySearchFunc(ts, from, time.Time.Compare)
	hi, _ := slices.BinarySearchFunc(ts, from.Add(dur), time.Time.Compare)
	return ts[lo:hi]
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
