package consume_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// exactPacer releases each bucket at exactly its configured interval: the
// next slot is the previous slot plus the interval, so lateness does not
// accumulate. A bucket more than a second behind (idle) restarts from now.
type exactPacer struct {
	mu       sync.Mutex
	interval map[policy.Key]time.Duration
	next     map[policy.Key]time.Time
	late     map[policy.Key][]time.Duration // how late each slot was taken
}

func newExactPacer() *exactPacer {
	return &exactPacer{interval: map[policy.Key]time.Duration{}, next: map[policy.Key]time.Time{}, late: map[policy.Key][]time.Duration{}}
}

func (p *exactPacer) set(k policy.Key, perSecond float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.interval[k] = time.Duration(float64(time.Second) / perSecond)
}

func (p *exactPacer) Interval(k policy.Key) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.interval[k]
}

func (p *exactPacer) WaitAt(now time.Time, k policy.Key, cost float64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.next[k]; ok && now.Before(n) {
		return n.Sub(now)
	}
	return 0
}

func (p *exactPacer) AcquireOrSuspendAt(now time.Time, k policy.Key, cost float64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.next[k]
	if !ok || now.Sub(n) > time.Second {
		n = now
	}
	if now.Before(n) {
		return n.Sub(now)
	}
	p.late[k] = append(p.late[k], now.Sub(n))
	p.next[k] = n.Add(time.Duration(cost * float64(p.interval[k])))
	return 0
}

// instantUpstreams always has capacity and answers with an empty body.
type instantUpstreams struct{}

func (instantUpstreams) TryAcquire(string) (consume.Slot, bool)             { return instantSlot{}, true }
func (u instantUpstreams) TryAcquireHeadroom(m string) (consume.Slot, bool) { return u.TryAcquire(m) }
func (instantUpstreams) OnFree(func([]string))                              {}
func (instantUpstreams) Free(string) (int, int)                             { return 1, 1 }

type instantSlot struct{}

func (instantSlot) Do(_ context.Context, _ *consume.Request, emit consume.Emitter) error {
	return emit.Emit(consume.Event{Kind: consume.EventBody, Data: []byte("{}")})
}
func (instantSlot) Release() {}

// releases records release times per bucket. Safe for concurrent use.
type releases struct {
	mu sync.Mutex
	at map[policy.Key][]time.Time
}

func (r *releases) Released(k policy.Key, _ time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[k] = append(r.at[k], now)
}
func (*releases) Suspended(policy.Key, time.Duration, string) {}
func (*releases) Dropped(policy.Key, string)                  {}
func (*releases) Panicked(policy.Key)                         {}

// gateway is the publishing side in miniature: what the HTTP handler does.
type gateway struct {
	e *embedded.Engine
	q *consume.Queue
}

func (g *gateway) submit(ctx context.Context, k policy.Key, id string, backlog int) (*consume.Pending, error) {
	return g.q.Submit(ctx, &consume.Request{ID: id, Key: k, Body: []byte("{}"), Band: 1, Weight: 1,
		MaxBacklog: backlog, Submitted: time.Now()})
}

func start(pacer consume.Pacer, obs consume.Observer) (*gateway, *consume.Consumer) {
	return startOn(pacer, instantUpstreams{}, obs)
}

func startOn(pacer consume.Pacer, up consume.Upstreams, obs consume.Observer) (*gateway, *consume.Consumer) {
	e := embedded.New(embedded.Config{MaxMessages: 1 << 20, Logger: quiet})
	g := &gateway{e: e, q: consume.NewQueue(e, "")}
	c := consume.NewConsumer(consume.ConsumerConfig{Queue: g.q, Pacer: pacer, Upstreams: up, Observer: obs, Logger: quiet})
	g.e.Start(c.Handle)
	return g, c
}

func (g *gateway) stop(t testing.TB, c *consume.Consumer) {
	if l, err := g.e.Close(context.Background()); err != nil || len(l.IDs) != 0 {
		t.Errorf("engine Close: %v, leftovers %d", err, len(l.IDs))
	}
	if err := c.Close(context.Background()); err != nil {
		t.Error(err)
	}
}

// The whole path: a bucket paced at 10/s releases its queue on schedule,
// positions count down, and every client gets its response.
func TestEndToEndPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pacer := newExactPacer()
		k := policy.Key{Tenant: "acme", Model: "llama"}
		pacer.set(k, 10)
		obs := &releases{at: map[policy.Key][]time.Time{}}
		g, c := start(pacer, obs)
		start := time.Now()
		var pend []*consume.Pending
		for i := range 5 {
			p, err := g.submit(context.Background(), k, strconv.Itoa(i), 0)
			if err != nil {
				t.Fatal(err)
			}
			pend = append(pend, p)
		}
		synctest.Wait()
		if pos := g.q.Position(pend[4]); pos != 4 {
			t.Errorf("last ticket at position %d after one release, want 4", pos)
		}
		for i, p := range pend {
			if ev := <-p.Events(); ev.Kind != consume.EventBody {
				t.Fatalf("%d: first event %+v", i, ev)
			}
			if ev := <-p.Events(); ev.Kind != consume.EventDone {
				t.Fatalf("%d: second event %+v", i, ev)
			}
			if got, want := p.ReleasedAt().Sub(start), time.Duration(i)*100*time.Millisecond; got != want {
				t.Errorf("%d released at %v, want %v", i, got, want)
			}
		}
		if st, held := g.q.Stat(k); held {
			t.Errorf("the drained bucket is still held: %+v", st)
		}
		g.stop(t, c)
	})
}

// BenchmarkPacingAccuracy runs engine + consumer + exactPacer in real time
// with 10,000 background buckets paced at 1 req/s each, and one measured
// bucket paced at 1, 10, 100 and 1,000 req/s. It reports the measured
// bucket's achieved rate as a percentage of the configured one, and the
// mean achieved rate of the background buckets. Run with -benchtime=1x:
// each sub-benchmark is one fixed-length experiment.
func BenchmarkPacingAccuracy(b *testing.B) {
	for _, rate := range []float64{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("rate=%g", rate), func(b *testing.B) {
			window := 3 * time.Second
			if rate == 1 {
				window = 5 * time.Second
			}
			measurePacing(b, rate, window)
		})
	}
}

func measurePacing(b *testing.B, rate float64, window time.Duration) {
	const background = 10000
	pacer := newExactPacer()
	obs := &releases{at: map[policy.Key][]time.Time{}}
	g, c := start(pacer, obs)
	ctx, cancel := context.WithCancel(context.Background())
	fill := func(k policy.Key, perSecond float64, n int) {
		pacer.set(k, perSecond)
		for i := range n {
			if _, err := g.submit(ctx, k, fmt.Sprint(k, "/", i), n); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range background {
		fill(policy.Key{Tenant: fmt.Sprint("bg", i), Model: "m"}, 1, int(window.Seconds())+3)
	}
	measured := policy.Key{Tenant: "measured", Model: "m"}
	fill(measured, rate, int(rate*(window.Seconds()+1))+1)
	time.Sleep(window)
	cancel() // the rest are dropped as client_gone
	g.e.Close(context.Background())
	c.Close(context.Background())

	obs.mu.Lock()
	defer obs.mu.Unlock()
	b.ReportMetric(achieved(obs.at[measured])/rate*100, "%-of-rate")
	var sum float64
	for k, at := range obs.at {
		if k != measured {
			sum += achieved(at)
		}
	}
	b.ReportMetric(sum/background*100, "bg-%-of-1/s")
	late := pacer.late[measured]
	slices.Sort(late)
	if len(late) > 0 {
		b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1e3, "p99-late-ms")
	}
}

// achieved is the release rate over the releases seen: intervals between
// the first and the last, over the time they span.
func achieved(at []time.Time) float64 {
	if len(at) < 2 {
		return 0
	}
	return float64(len(at)-1) / at[len(at)-1].Sub(at[0]).Seconds()
}
