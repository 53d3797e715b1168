package control

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

const model = "meta-llama/Llama-3-8B"

// pool is two simulated vLLMs serving model, with a pacer over a normal
// and a high-priority tenant.
type pool struct {
	sims  []*vllmsim.Server
	urls  []string
	pacer *policy.Pacer
	loop  *Loop
	logs  *bytes.Buffer
}

func newPool(t *testing.T) *pool {
	t.Helper()
	p := &pool{logs: new(bytes.Buffer)}
	for range 2 {
		s := vllmsim.New(vllmsim.Config{Models: []string{model}})
		ts := httptest.NewServer(s)
		t.Cleanup(ts.Close)
		p.sims, p.urls = append(p.sims, s), append(p.urls, ts.URL)
	}
	p.pacer = newPacer(t)
	p.loop = NewLoop(Options{Config: Config{Interval: time.Hour, WaitingTarget: 8, MinFactor: 0.1, MaxFactor: 1,
		Decrease: 0.5, Increase: 0.25, Hysteresis: 2}, Pacer: p.pacer, Upstreams: func() []string { return p.urls },
		Logger: slog.New(slog.NewTextHandler(p.logs, nil))})
	return p
}

// newPacer paces a normal and a high-priority tenant at 10/s.
func newPacer(t *testing.T) *policy.Pacer {
	t.Helper()
	f, err := config.Parse([]byte(`
upstreams: [{url: "http://127.0.0.1:1"}]
defaults: {rate: 10}
tenants:
  - {id: normal, keys: [k1]}
  - {id: vip, keys: [k2], priority: high}
`))
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	return policy.NewPacer(policy.NewTable(q))
}

func (p *pool) load(waiting ...float64) {
	for i, w := range waiting {
		p.sims[i].SetLoad(&vllmsim.Load{Waiting: w, Running: 4, KVCache: 0.5})
	}
}

// ticks steps the loop n times and returns the column factor after each.
func (p *pool) ticks(n int) []float64 {
	var out []float64
	for range n {
		p.loop.Tick(context.Background())
		out = append(out, p.pacer.ColumnFactor(model))
	}
	return out
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoopTightensCongestedColumnAndKeepsHighPriorityPace(t *testing.T) {
	p := newPool(t)
	normal, vip := policy.Key{Tenant: "normal", Model: model}, policy.Key{Tenant: "vip", Model: model}
	p.load(20, 10) // mean 15 waiting per upstream > target 8
	if got, want := p.ticks(4), []float64{1, 0.5, 0.5, 0.25}; !equal(got, want) {
		t.Fatalf("factors while congested = %v, want %v", got, want)
	}
	if got := p.pacer.EffectiveRate(normal); got != 2.5 {
		t.Fatalf("normal tenant rate = %v, want 10 × 0.25", got)
	}
	if got := p.pacer.EffectiveRate(vip); got != 10 {
		t.Fatalf("high-priority tenant rate = %v, want its full 10", got)
	}
	st := p.loop.Status()
	if len(st) != 1 || st[0].Model != model || st[0].Waiting != 15 || st[0].Running != 8 || st[0].KVCache != 0.5 ||
		st[0].Upstreams != 2 || st[0].Reason != ReasonCongested || st[0].Factor != 0.25 {
		t.Fatalf("status = %+v", st)
	}
	p.load(6, 6) // in the band: hold
	if got, want := p.ticks(3), []float64{0.25, 0.25, 0.25}; !equal(got, want) {
		t.Fatalf("factors in band = %v, want %v", got, want)
	}
	p.load(1, 2) // drained
	if got, want := p.ticks(5), []float64{0.25, 0.5, 0.75, 1, 1}; !equal(got, want) {
		t.Fatalf("factors while drained = %v, want %v", got, want)
	}
	if !strings.Contains(p.logs.String(), `msg="control: column factor changed" model=meta-llama/Llama-3-8B from=1 to=0.5 reason=congested waiting=15 target=8`) {
		t.Fatalf("logs lack the change:\n%s", p.logs)
	}
}

func TestLoopLeavesPinnedModelAlone(t *testing.T) {
	p := newPool(t)
	p.loop.Pin(model, 0.8)
	p.load(50, 50)
	if got, want := p.ticks(4), []float64{0.8, 0.8, 0.8, 0.8}; !equal(got, want) {
		t.Fatalf("pinned factors = %v, want %v", got, want)
	}
	if st := p.loop.Status(); st[0].Reason != ReasonPinned || !st[0].Pinned {
		t.Fatalf("status = %+v", st)
	}
	p.loop.Unpin(model)
	if got, want := p.ticks(2), []float64{0.8, 0.4}; !equal(got, want) {
		t.Fatalf("after unpin = %v, want %v", got, want)
	}
}

func TestLoopHoldsWhenScrapesFail(t *testing.T) {
	p := newPool(t)
	p.load(20, 20)
	p.ticks(1)
	p.urls = []string{"http://127.0.0.1:1"} // nothing listens there
	if got, want := p.ticks(3), []float64{1, 1, 1}; !equal(got, want) {
		t.Fatalf("factors without data = %v, want %v", got, want)
	}
	if st := p.loop.Status(); st[0].Reason != ReasonNoData {
		t.Fatalf("status = %+v", st)
	}
	if n := strings.Count(p.logs.String(), "scrape failed"); n != 1 {
		t.Fatalf("scrape failure logged %d times, want once per outage:\n%s", n, p.logs)
	}
}

// inProcess is a RoundTripper that serves requests with h directly, with
// no socket: inside a synctest bubble a scrape then blocks on nothing but
// the bubble's own goroutines. Like http.Transport, it fails a request
// whose context ended.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// bubbleLoop is a loop scraping one in-process simulated vLLM that reports
// 20 waiting requests (over the target of 8), with a tick counter: the
// loop reads its clock once per Tick. Call it inside a synctest bubble.
type bubbleLoop struct {
	loop  *Loop
	pacer *policy.Pacer
	ticks atomic.Int64
}

func newBubbleLoop(t *testing.T, interval time.Duration) *bubbleLoop {
	t.Helper()
	sim := vllmsim.New(vllmsim.Config{Models: []string{model}})
	sim.SetLoad(&vllmsim.Load{Waiting: 20, Running: 4, KVCache: 0.5})
	b := &bubbleLoop{pacer: newPacer(t)}
	b.loop = NewLoop(Options{Config: Config{Interval: interval, WaitingTarget: 8, MinFactor: 0.1, MaxFactor: 1,
		Decrease: 0.5, Increase: 0.25, Hysteresis: 2}, Pacer: b.pacer,
		Upstreams: func() []string { return []string{"http://sim"} },
		Client: &http.Client{Transport: inProcess{http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.ticks.Add(1) // one scrape of the one upstream per tick
			sim.ServeHTTP(w, r)
		})}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return b
}

// loopRunning reports whether a goroutine is inside Loop.run.
func loopRunning(t *testing.T) bool {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(buf.String(), "control.(*Loop).run")
}

// TestLoopTicksEveryIntervalUntilStopped: a started loop ticks once per
// interval and applies the controller's decisions; Stop ends its goroutine
// and no tick follows, however long the test waits; a second Start runs
// it again.
func TestLoopTicksEveryIntervalUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Second
		b := newBubbleLoop(t, interval)
		if err := b.loop.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := b.loop.Start(t.Context()); err != ErrStarted {
			t.Fatalf("second Start = %v, want ErrStarted", err)
		}
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		if n := b.ticks.Load(); n != 3 {
			t.Fatalf("%d ticks in 3.5 intervals, want 3", n)
		}
		// Hysteresis 2: the second congested scrape halves the factor.
		if got := b.pacer.ColumnFactor(model); got != 0.5 {
			t.Fatalf("column factor after 3 congested ticks = %v, want 0.5", got)
		}
		if !loopRunning(t) {
			t.Fatal("no goroutine in Loop.run while started")
		}

		b.loop.Stop()
		synctest.Wait() // let the goroutine that called wg.Done exit
		if loopRunning(t) {
			t.Fatal("Loop.run still running after Stop returned")
		}
		b.loop.Stop() // a no-op on a stopped loop
		time.Sleep(10 * interval)
		synctest.Wait()
		if n := b.ticks.Load(); n != 3 {
			t.Fatalf("%d ticks after Stop, want still 3", n)
		}
		if got := b.pacer.ColumnFactor(model); got != 0.5 {
			t.Fatalf("column factor moved after Stop: %v, want 0.5", got)
		}

		if err := b.loop.Start(t.Context()); err != nil {
			t.Fatalf("Start after Stop = %v", err)
		}
		time.Sleep(2*interval + interval/2)
		synctest.Wait()
		if n := b.ticks.Load(); n != 5 {
			t.Fatalf("%d ticks after restarting for 2.5 intervals, want 5", n)
		}
		b.loop.Stop()
	})
}

// TestLoopStopsWhenContextCancelled: cancelling Start's context ends the
// loop's goroutine without a Stop.
func TestLoopStopsWhenContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Second
		b := newBubbleLoop(t, interval)
		ctx, cancel := context.WithCancel(t.Context())
		if err := b.loop.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval + interval/2)
		synctest.Wait()
		cancel()
		synctest.Wait()
		if loopRunning(t) {
			t.Fatal("Loop.run still running after its context was cancelled")
		}
		time.Sleep(10 * interval)
		synctest.Wait()
		if n := b.ticks.Load(); n != 1 {
			t.Fatalf("%d ticks, want the 1 before the cancel", n)
		}
		b.loop.Stop()
	})
}

// TestLoopStopAbortsScrapeInProgress: an upstream that never answers
// cannot hold Stop up; the aborted scrape is not logged as a failure.
func TestLoopStopAbortsScrapeInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Second
		scraping := make(chan struct{})
		hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(scraping)
			<-r.Context().Done()
		})
		logs := new(bytes.Buffer)
		l := NewLoop(Options{Config: Config{Interval: interval}, Pacer: newPacer(t),
			Upstreams: func() []string { return []string{"http://sim"} },
			Client:    &http.Client{Transport: inProcess{hang}},
			Logger:    slog.New(slog.NewTextHandler(logs, nil))})
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval)
		<-scraping
		l.Stop() // a deadlock here fails the bubble
		synctest.Wait()
		if loopRunning(t) {
			t.Fatal("Loop.run still running after Stop returned")
		}
		if strings.Contains(logs.String(), "scrape failed") {
			t.Fatalf("the aborted scrape was logged as a failure:\n%s", logs)
		}
	})
}
