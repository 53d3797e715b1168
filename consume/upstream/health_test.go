package upstream

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
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
	f := &flakyUpstream{sim: vllmsim.New(vllmsim.Config{Models: []string{"m"}, TTFT: -1, ITL: -1})}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			f.probes.Add(1)
		}
		if st := f.status.Load(); st != 0 {
			w.WriteHeader(int(st))
			return
		}
		f.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

func TestPassiveDownBackoffAndProberRecovery(t *testing.T) {
	f := newFlaky(t)
	p := newPool(t, UpstreamConfig{URL: f.url, Models: []string{"m"}})
	clock := &manualClock{now: time.Unix(1000, 0)}
	p.now = clock.Now
	call := func() error {
		s, ok := p.TryAcquire("m")
		if !ok {
			return errNoSlot
		}
		return s.Do(t.Context(), chatReq("r", false, ""), (&recordEvents{}).emit)
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
		clock.Advance(st.advance)
		err := call()
		if st.wantErr != nil && err != st.wantErr || st.wantErr == nil && (err == nil || err == errNoSlot) {
			t.Fatalf("step %d: err = %v", i, err)
		}
		s := p.Stats()[0]
		if got := s.DownUntil.Sub(clock.Now()); s.Healthy || st.wantErr == nil && got != st.wantBackoff {
			t.Fatalf("step %d: healthy %v, down for %v, want %v", i, s.Healthy, got, st.wantBackoff)
		}
	}
	// The prober leaves it alone during the backoff, then brings it back.
	f.status.Store(0)
	p.probeAll(t.Context(), false)
	if n := f.probes.Load(); n != 0 {
		t.Fatalf("%d probes during the backoff", n)
	}
	clock.Advance(8 * time.Second)
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
	if s := p.Stats()[0]; s.DownUntil.Sub(clock.Now()) != time.Second {
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

// Start runs the prober until Close; Close waits for it.
func TestStartRunsProberUntilClose(t *testing.T) {
	probed := make(chan struct{}, 100)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			select {
			case probed <- struct{}{}:
			default:
			}
		}
	}))
	defer ts.Close()
	p, err := NewPool(Config{HealthInterval: time.Millisecond, Upstreams: []UpstreamConfig{{URL: ts.URL, Models: []string{"m"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the initial probe and two ticks
		waitFor(t, probed, "probe "+string(rune('0'+i)))
	}
	p.Close()
	p.Close()
	if err := p.Start(t.Context()); err != ErrClosed {
		t.Fatalf("Start after Close: %v", err)
	}
}
