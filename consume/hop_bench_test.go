package consume_test

import (
	"context"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

// hopUpstreams records, at the upstream call, how long the request took
// from its submission: the queue hop.
type hopUpstreams struct {
	mu   sync.Mutex
	hops []time.Duration
}

func (u *hopUpstreams) TryAcquire(string) (consume.Slot, bool)         { return hopSlot{u}, true }
func (u *hopUpstreams) TryAcquireHeadroom(string) (consume.Slot, bool) { return hopSlot{u}, true }
func (*hopUpstreams) OnFree(func([]string))                            {}
func (*hopUpstreams) Free(string) (int, int)                           { return 1, 1 }

type hopSlot struct{ u *hopUpstreams }

func (s hopSlot) Do(_ context.Context, req *consume.Request, emit consume.Emitter) error {
	hop := time.Since(req.Submitted)
	s.u.mu.Lock()
	s.u.hops = append(s.u.hops, hop)
	s.u.mu.Unlock()
	return emit.Emit(consume.Event{Kind: consume.EventBody, Data: []byte("{}")})
}
func (hopSlot) Release() {}

// BenchmarkQueueHop is the embedded queue's hop in isolation: Submit
// (publish to the request's LiteTopic) → delivery → the consumer's
// checks → dispatch → the upstream call, open loop at 1,000 req/s over
// 100 tenants of one model named as a vLLM pool names them (hopModel),
// with the engine as the gateway runs it (inline delivery, 64 workers)
// and the gateway's pacer (see hopPacer; every bucket at 1,000/s).
// Run it with -benchtime 4000x; it reports the hop's p50 and p99 in µs
// (an op is one request, 1 ms apart by construction),
// timed after a warm-up (see warmUp), with the warm-up's length and the
// page faults per timed op. A hop is timed from the call that submits
// the request (its Submitted): what the caller makes of it before, as
// the gateway's handler makes its exchange, is not the queue's.
// "sink" submits as the gateway does every request, streamed or not
// (SubmitInto, with the Pending in the caller's state; the upstream call
// is handed to the submitting goroutine); "sink-alloc" is the same
// through SubmitTo, which allocates the Pending on the hop; "channel" is
// Submit, without a sink, as JSON answers once went (the call runs on a
// goroutine of its own, the handler reads a channel); "sink-unpaced"
// is "sink" with a pacer that answers at once and looks nothing up, as
// every variant had until 2026-12-06 (bench/findings/overhead.md).
// "control-N" is no queue at all, only N allocations of 72 bytes timed
// the same way (a "sink" hop makes 5, about 200 bytes; see
// bench/findings/overhead.md): what the loop's shape, a goroutine woken
// from a sleep that allocates, costs by itself.
// "-awake" is the same with every CPU kept from going idle between two
// ops (see keepAwake; Linux only): on a VM, the way back from an idle
// vCPU's halt is part of an op that comes 1 ms after the last, as it is
// of a gateway's request at low load, and not of one on a busy machine.
func BenchmarkQueueHop(b *testing.B) {
	for _, n := range []int{0, 5, 15} {
		b.Run("control-"+strconv.Itoa(n), func(b *testing.B) { benchAllocs(b, n) })
	}
	b.Run("control-5-awake", func(b *testing.B) {
		defer keepAwake(b)()
		benchAllocs(b, 5)
	})
	b.Run("sink", func(b *testing.B) { benchHop(b, submitSink(b)) })
	b.Run("sink-unpaced", func(b *testing.B) { benchHopWith(b, unpaced{}, submitSink(b)) })
	b.Run("sink-awake", func(b *testing.B) {
		defer keepAwake(b)()
		benchHop(b, submitSink(b))
	})
	b.Run("sink-alloc", func(b *testing.B) {
		benchHop(b, func(q *consume.Queue, req *consume.Request) (*consume.Pending, <-chan struct{}) {
			s := endSink{done: make(chan struct{})}
			req.Submitted = time.Now()
			p, err := q.SubmitTo(context.Background(), req, s)
			if err != nil {
				b.Fatal(err)
			}
			return p, s.done
		})
	})
	b.Run("channel", func(b *testing.B) {
		benchHop(b, func(q *consume.Queue, req *consume.Request) (*consume.Pending, <-chan struct{}) {
			req.Submitted = time.Now()
			p, err := q.Submit(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { // the handler's side: read the response
				defer close(done)
				for ev := range p.Events() {
					if ev.Kind == consume.EventDone || ev.Kind == consume.EventError {
						return
					}
				}
			}()
			return p, done
		})
	})
}

// submitSink submits a request as the gateway does every request,
// streamed or not: into a Pending in the caller's state, with a sink.
func submitSink(b *testing.B) func(*consume.Queue, *consume.Request) (*consume.Pending, <-chan struct{}) {
	return func(q *consume.Queue, req *consume.Request) (*consume.Pending, <-chan struct{}) {
		st := &struct {
			p    consume.Pending
			sink endSink
		}{sink: endSink{done: make(chan struct{})}}
		req.Submitted = time.Now()
		if err := q.SubmitInto(context.Background(), &st.p, req, st.sink); err != nil {
			b.Fatal(err)
		}
		return &st.p, st.sink.done
	}
}

// newHopQueueWith is the queue and consumer BenchmarkQueueHop times, as
// the gateway runs them (inline delivery, 64 workers), with pacer in the
// consumer; stop closes both.
func newHopQueueWith(b *testing.B, pacer consume.Pacer) (q *consume.Queue, up *hopUpstreams, stop func()) {
	e := embedded.New(embedded.Config{Logger: quiet, InlineDelivery: true, Workers: 64})
	q = consume.NewQueue(e, "")
	up = &hopUpstreams{}
	c := consume.NewConsumer(consume.ConsumerConfig{Queue: q, Pacer: pacer, Upstreams: up, Logger: quiet})
	if err := e.Start(c.Handle); err != nil {
		b.Fatal(err)
	}
	return q, up, func() {
		e.Close(context.Background())
		c.Close(context.Background())
	}
}

// BenchmarkQueueHopWarm is BenchmarkQueueHop's "sink" hop back to back,
// with no sleep between two: its CPU and allocations with every cache
// warm, a figure that this machine's noise moves far less than the
// open loop's percentiles. An op is one request, from its submission
// to its Finish; the tenants' names are made before, as the gateway's
// come from its tenant table.
func BenchmarkQueueHopWarm(b *testing.B) {
	q, up, stop := newHopQueueWith(b, hopPacer(b, 1e9)) // back to back: 1,000/s would bind
	defer stop()
	keys := make([]policy.Key, hopTenants)
	for i := range keys {
		keys[i] = policy.Key{Tenant: "t" + strconv.Itoa(i), Model: hopModel}
	}
	type state struct {
		p    consume.Pending
		sink endSink
		req  consume.Request
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st := &state{sink: endSink{done: make(chan struct{})}}
		st.req = consume.Request{ID: strconv.Itoa(i), Key: keys[i%hopTenants], Body: []byte("{}"), Band: 1, Weight: 1, Submitted: time.Now()}
		if err := q.SubmitInto(context.Background(), &st.p, &st.req, st.sink); err != nil {
			b.Fatal(err)
		}
		<-st.sink.done
		q.Finish(&st.p)
		if i%4096 == 0 {
			up.mu.Lock()
			up.hops = up.hops[:0]
			up.mu.Unlock()
		}
	}
}

func benchHop(b *testing.B, submit func(*consume.Queue, *consume.Request) (*consume.Pending, <-chan struct{})) {
	benchHopWith(b, hopPacer(b, 1000), submit)
}

// benchHopWith is benchHop with pacer in the consumer.
func benchHopWith(b *testing.B, pacer consume.Pacer, submit func(*consume.Queue, *consume.Request) (*consume.Pending, <-chan struct{})) {
	q, up, stop := newHopQueueWith(b, pacer)
	var wg sync.WaitGroup
	hop := func(i int) {
		k := policy.Key{Tenant: "t" + strconv.Itoa(i%hopTenants), Model: hopModel}
		req := &consume.Request{ID: strconv.Itoa(i), Key: k, Body: []byte("{}"), Band: 1, Weight: 1}
		p, done := submit(q, req)
		wg.Go(func() {
			<-done
			q.Finish(p)
		})
	}
	warm := warmUp(b, hop)
	wg.Wait()
	up.mu.Lock()
	up.hops = up.hops[:0]
	up.mu.Unlock()
	f0 := minorFaults()
	b.ResetTimer()
	openLoop(b.N, func(i int) { hop(warm + i) })
	wg.Wait()
	b.StopTimer()
	faults := minorFaults() - f0
	stop()
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.hops) != b.N {
		b.Fatalf("%d upstream calls for %d requests", len(up.hops), b.N)
	}
	reportHops(b, up.hops, warm, faults)
}

// reportHops reports the p50 and p99 of hops, in µs, the calls of the
// warm-up and the page faults per timed op.
func reportHops(b *testing.B, hops []time.Duration, warm int, faults int64) {
	slices.Sort(hops)
	b.ReportMetric(float64(warm), "warmup-calls")
	b.ReportMetric(float64(faults)/float64(len(hops)), "faults/op")
	b.ReportMetric(float64(hops[len(hops)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(hops[len(hops)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// allocSink keeps benchAllocs's allocations from being optimised away.
var allocSink []byte

// benchAllocs times n allocations of 72 bytes in benchHop's loop: 1 ms
// apart, each after a sleep, after the same warm-up.
func benchAllocs(b *testing.B, n int) {
	var hops []time.Duration
	alloc := func(int) {
		t := time.Now()
		for range n {
			allocSink = make([]byte, 72)
		}
		hops = append(hops, time.Since(t))
	}
	warm := 0
	if n > 0 { // with nothing allocated, the collector never runs
		warm = warmUp(b, alloc)
	}
	hops = make([]time.Duration, 0, b.N)
	f0 := minorFaults()
	b.ResetTimer()
	openLoop(b.N, alloc)
	b.StopTimer()
	reportHops(b, hops, warm, minorFaults()-f0)
}

// warmUp runs f in the benchmark's open loop, untimed, until the heap
// has been collected twice (at most maxWarmup calls), unless the run is
// the framework's one-op probe; it returns how many calls it made. A
// fresh process allocates into heap it has never touched until its
// first collection, and a goroutine that has just slept pays 5-30 µs
// for each first touch of a page; a gateway serving 1,000 req/s runs on
// a heap it has touched and collected already, and that is what the
// benchmark times (see bench/findings/overhead.md).
func warmUp(b *testing.B, f func(i int)) int {
	if b.N == 1 {
		return 0
	}
	start := gcCycles()
	n := 0
	for n < maxWarmup && gcCycles() < start+2 {
		openLoop(warmStep, func(i int) { f(n + i) })
		n += warmStep
	}
	return n
}

// maxWarmup bounds a warm-up to 60 s at 1,000 per second; warmStep is
// how many calls it makes between looks at the collector.
const maxWarmup, warmStep = 60_000, 500

// gcCycles is how many collections the runtime has completed.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// openLoop calls f(i) for i in [0, n) on a 1 ms grid (1,000 per second),
// sleeping to each one's time: open loop, as requests arrive.
func openLoop(n int, f func(i int)) {
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Millisecond)))
		f(i)
	}
}

// endSink is a stream's sink as the gateway's is: it takes the events on
// the goroutine that produces them; done closes at the last one.
type endSink struct{ done chan struct{} }

func (endSink) Attach(*consume.Pending) {}
func (s endSink) Deliver(ev consume.Event) error {
	if ev.Kind == consume.EventDone || ev.Kind == consume.EventError {
		close(s.done)
	}
	return nil
}

// hopModel is a model name as a vLLM pool serves them, from Hugging Face:
// an organisation, a '/', and dots.
const hopModel = "meta-llama/Llama-3.1-8B-Instruct"

// hopTenants is how many tenants the benchmark's requests go round.
const hopTenants = 100

// hopPacer is the gateway's pacer (policy.Pacer reading the tenant
// table) over the benchmark's tenants, each paced at rate requests/s:
// every bucket is paced, as the default config paces them (10/s), but
// at a rate its requests never reach (the open loop's 10/s a bucket
// against 1,000), so that no request waits for its slot and the hop is
// the pacer's two questions, not a pacing wait.
func hopPacer(b *testing.B, rate float64) *policy.Pacer {
	specs := make([]policy.TenantSpec, hopTenants)
	for i := range specs {
		specs[i] = policy.TenantSpec{ID: "t" + strconv.Itoa(i), Limits: policy.Limits{Rate: rate, Backlog: 100}}
	}
	q, err := policy.NewQuotas(policy.Limits{Rate: 10, Backlog: 100}, nil, specs)
	if err != nil {
		b.Fatal(err)
	}
	return policy.NewPacer(policy.NewTable(q))
}
