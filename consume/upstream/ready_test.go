package upstream

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// vllm is a fake vLLM that a test switches between loading its model and
// serving: while loading, /health answers 503 (until up is set),
// /v1/models lists nothing and generation requests get a 503.
type vllm struct {
	up  atomic.Bool
	sim atomic.Pointer[vllmsim.Server] // nil while loading
}

// serve makes v healthy and serving models.
func (v *vllm) serve(models ...string) {
	v.sim.Store(vllmsim.New(vllmsim.Config{Models: models, TTFT: -1, ITL: -1}))
	v.up.Store(true)
}

// unload puts v back to loading.
func (v *vllm) unload() {
	v.up.Store(false)
	v.sim.Store(nil)
}

func (v *vllm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sim := v.sim.Load()
	switch {
	case r.URL.Path == "/health" && !v.up.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
	case sim != nil:
		sim.ServeHTTP(w, r)
	case r.URL.Path == "/v1/models":
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	case r.URL.Path != "/health":
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// TestReadyOnlyWithAHealthyUpstreamAndItsModels: an upstream past its
// backoff, or one whose /health passes while it lists no model yet, does
// not make the pool ready; ready comes with the models.
func TestReadyOnlyWithAHealthyUpstreamAndItsModels(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  UpstreamConfig
	}{
		{"discovered", UpstreamConfig{URL: "http://vllm"}},
		{"configured", UpstreamConfig{URL: "http://vllm", Models: []string{"m"}}},
	} {
		t.Run(c.name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { readyWithModels(t, c.cfg) }) })
	}
}

func readyWithModels(t *testing.T, cfg UpstreamConfig) {
	up := new(vllm)
	p, err := NewPool(Config{Transport: hostTransport{"vllm": up}, Upstreams: []UpstreamConfig{cfg}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	wantModels := func(step string, ready bool, models ...string) {
		t.Helper()
		if got := p.Ready(); got != ready {
			t.Fatalf("%s: Ready = %v, want %v (stats %+v)", step, got, ready, p.Stats())
		}
		if got := p.Models(); !slices.Equal(got, models) {
			t.Fatalf("%s: Models = %v, want %v", step, got, models)
		}
	}
	up.unload()
	p.probeAll(t.Context(), true) // as Start does
	configured := cfg.Models
	wantModels("loading", false, configured...)
	time.Sleep(time.Second)
	wantModels("past the backoff, not probed again", false, configured...)
	up.up.Store(true)
	p.probeAll(t.Context(), false)
	if cfg.Models == nil {
		wantModels("health passes, no model listed yet", false)
		up.serve("m")
		p.probeAll(t.Context(), false)
	}
	wantModels("serving", true, "m")
}

// hostTransport serves each host's requests in memory. A synctest bubble
// needs it: time there only advances while every goroutine is durably
// blocked, which one reading a socket never is.
type hostTransport map[string]http.Handler

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	h[r.URL.Host].ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// TestNotReadyProbesEveryDownBackoff: while no upstream is ready the
// prober checks every DownBackoff, backoff or not, so an upstream that
// took two minutes to load its model (its backoff is at the 30 s
// maximum by then) serves within a second of coming up, models
// included.
func TestNotReadyProbesEveryDownBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := new(vllm)
		p, err := NewPool(Config{Transport: hostTransport{"vllm:8000": v}, HealthInterval: time.Hour,
			Upstreams: []UpstreamConfig{{URL: "http://vllm:8000"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		if s := p.Stats()[0]; p.Ready() || s.Healthy || s.DownUntil.Sub(time.Now()) <= 0 {
			t.Fatalf("still loading: ready %v, %+v", p.Ready(), s)
		}
		v.serve("m")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := p.Models(); !p.Ready() || !slices.Equal(got, []string{"m"}) {
			t.Fatalf("a second after the upstream came up: ready %v, models %v", p.Ready(), got)
		}
	})
}

// TestPassiveRecoveryRediscoversModels: a request that succeeds on a
// discovering upstream back from a failure makes the pool discover its
// models at once, not a probe interval later: it may have come back with
// other models.
func TestPassiveRecoveryRediscoversModels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := new(vllm), new(vllm)
		a.serve("m")
		b.serve("other") // keeps the pool ready, so the prober keeps its hour
		p, err := NewPool(Config{Transport: hostTransport{"a:8000": a, "b:8000": b}, HealthInterval: time.Hour,
			Upstreams: []UpstreamConfig{{URL: "http://a:8000"}, {URL: "http://b:8000", Models: []string{"other"}}}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		call := func() error {
			s, ok := p.TryAcquire("m")
			if !ok {
				return errNoSlot
			}
			return s.Do(t.Context(), chatReq("r", false, ""), &recordEvents{})
		}
		a.unload()
		if err := call(); err == nil {
			t.Fatal("a request to a loading upstream succeeded")
		}
		a.serve("m", "n")
		time.Sleep(time.Second) // the backoff
		if err := call(); err != nil {
			t.Fatalf("the request on trial: %v", err)
		}
		synctest.Wait()
		if s := p.Stats()[0]; !s.Healthy || !slices.Equal(s.Models, []string{"m", "n"}) {
			t.Fatalf("after the passive recovery: %+v", s)
		}
	})
}
