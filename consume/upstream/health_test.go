package upstream

import (
	"bytes"
	"errors"
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
)

// flakyUpstream answers generation requests with status (atomic, so the
// test can change it) and counts /health probes.
type flakyUpstream struct {
	sim    *vllmsim.Server
	status atomic.Int32 // 0: let the sim answer
	probes atomic.Int32
	url    string
}

func newFlaky(t *testing.T) *flakyUpstream {
	f := newFlakyHandler()
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// newFlakyHandler is a flakyUpstream with no socket, for a synctest
// bubble (through hostTransport); its url is left empty.
func newFlakyHandler() *flakyUpstream {
	return &flakyUpstream{sim: vllmsim.New(vllmsim.Config{Models: []string{"m"}, TTFT: -1, ITL: -1})}
}

func (f *flakyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		f.probes.Add(1)
	}
	if st := f.status.Load(); st != 0 {
		w.WriteHeader(int(st))
		return
	}
	f.sim.ServeHTTP(w, r)
}

func TestPassiveDownBackoffAndProberRecovery(t *testing.T) {
	synctest.Test(t, passiveDownBackoffAndProberRecovery)
}

func passiveDownBackoffAndProberRecovery(t *testing.T) {
	f := newFlakyHandler()
	p, err := NewPool(Config{Transport: hostTransport{"flaky": f}, Upstreams: []UpstreamConfig{{URL: "http://flaky", Models: []string{"m"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	call := func() error {
		s, ok := p.TryAcquire("m")
		if !ok {
			return errNoSlot
		}
		return s.Do(t.Context(), chatReq("r", false, ""), &recordEvents{})
	}
	f.status.Store(503)
	steps := []struct {
		advance     time.Duration
		wantErr     error // nil: any error but errNoSlot
		wantBackoff time.Duration
	}{
		{0, nil, time.Second}, // 503: down for 1s
		{999 * time.Millisecond, errNoSlot, time.Second},
		{time.Millisecond, nil, 2 * time.Second}, // on trial, fails again: 2s
		{2 * time.Second, nil, 4 * time.Second},
		{4 * time.Second, nil, 8 * time.Second},
	}
	for i, st := range steps {
		time.Sleep(st.advance)
		err := call()
		if st.wantErr != nil && err != st.wantErr || st.wantErr == nil && (err == nil || err == errNoSlot) {
			t.Fatalf("step %d: err = %v", i, err)
		}
		s := p.Stats()[0]
		if got := s.DownUntil.Sub(time.Now()); s.Healthy || st.wantErr == nil && got != st.wantBackoff {
			t.Fatalf("step %d: healthy %v, down for %v, want %v", i, s.Healthy, got, st.wantBackoff)
		}
	}
	// The prober leaves it alone during the backoff, then brings it back.
	f.status.Store(0)
	p.probeAll(t.Context(), false)
	if n := f.probes.Load(); n != 0 {
		t.Fatalf("%d probes during the backoff", n)
	}
	time.Sleep(8 * time.Second)
	p.probeAll(t.Context(), false)
	if s := p.Stats()[0]; f.probes.Load() != 1 || !s.Healthy || !s.DownUntil.IsZero() || s.Errors != 4 {
		t.Fatalf("after the probe: %+v (%d probes)", s, f.probes.Load())
	}
	if err := call(); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	// Backoff starts over after recovery.
	f.status.Store(500)
	_ = call()
	if s := p.Stats()[0]; s.DownUntil.Sub(time.Now()) != time.Second {
		t.Fatalf("backoff did not start over: %+v", s)
	}
}

var errNoSlot = errors.New("no slot")

func TestProbeFailureMarksDown(t *testing.T) {
	f := newFlaky(t)
	p := newPool(t, UpstreamConfig{URL: f.url, Models: []string{"m"}})
	f.status.Store(503)
	p.probeAll(t.Context(), false)
	if s := p.Stats()[0]; s.Healthy || s.Errors != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// inProcess is a RoundTripper that serves requests with h directly, with
// no socket, so a pool can run inside a synctest bubble.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// proberRunning reports whether a goroutine is inside Pool.probeLoop.
func proberRunning(t *testing.T) bool {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(buf.String(), "upstream.(*Pool).probeLoop")
}

// Start probes at once and then once per HealthInterval until Close;
// Close waits for the prober, after which no probe is ever sent.
func TestStartRunsProberUntilClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var probes atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				probes.Add(1)
			}
		})
		const interval = time.Second
		p, err := NewPool(Config{HealthInterval: interval, Transport: inProcess{h}, Logger: slog.New(slog.DiscardHandler),
			Upstreams: []UpstreamConfig{{URL: "http://up", Models: []string{"m"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := probes.Load(); n != 1 {
			t.Fatalf("%d probes when Start returned, want the initial 1", n)
		}
		time.Sleep(2*interval + interval/2)
		synctest.Wait()
		if n := probes.Load(); n != 3 {
			t.Fatalf("%d probes after 2.5 intervals, want 3 (the initial one and two ticks)", n)
		}
		if !proberRunning(t) {
			t.Fatal("no goroutine in Pool.probeLoop while started")
		}

		p.Close()
		synctest.Wait() // let the goroutine that called wg.Done exit
		if proberRunning(t) {
			t.Fatal("Pool.probeLoop still running after Close returned")
		}
		p.Close() // safe to repeat
		time.Sleep(10 * interval)
		synctest.Wait()
		if n := probes.Load(); n != 3 {
			t.Fatalf("%d probes after Close, want still 3", n)
		}
		if err := p.Start(t.Context()); err != ErrClosed {
			t.Fatalf("Start after Close: %v", err)
		}
	})
}
