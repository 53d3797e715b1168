package control

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
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
	p.pacer = policy.NewPacer(policy.NewTable(q))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.loop = NewLoop(Options{Config: Config{Interval: time.Hour, WaitingTarget: 8, MinFactor: 0.1, MaxFactor: 1,
		Decrease: 0.5, Increase: 0.25, Hysteresis: 2}, Pacer: p.pacer, Upstreams: func() []string { return p.urls },
		Now: func() time.Time { return t0 }, Logger: slog.New(slog.NewTextHandler(p.logs, nil))})
	return p
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

func TestLoopStartStop(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPool(t)
	p.loop.o.Config.Interval = time.Millisecond
	p.load(20, 20)
	if err := p.loop.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.loop.Start(context.Background()); err != ErrStarted {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.pacer.ColumnFactor(model) == 1 { // the ticker drives it
		if time.Now().After(deadline) {
			t.Fatal("the running loop never tightened the column")
		}
		time.Sleep(time.Millisecond)
	}
	p.loop.Stop()
	p.loop.Stop() // idempotent
	f := p.pacer.ColumnFactor(model)
	p.load(20, 20)
	if got := p.pacer.ColumnFactor(model); got != f {
		t.Fatalf("factor moved after Stop: %v → %v", f, got)
	}
	left := runtime.NumGoroutine() - before
	if left > 8 { // httptest servers and idle client connections remain until cleanup
		t.Fatalf("%d goroutines left after Stop", left)
	}
}
