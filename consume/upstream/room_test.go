package upstream

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
)

// TestLearnerSteps drives the learned limit reading by reading.
func TestLearnerSteps(t *testing.T) {
	l := newLearner(learnCeiling, DefaultKVThreshold)
	steps := []struct {
		running, waiting, kv float64
		inFlight             int
		want                 int
	}{
		{0, 0, 0, 0, 8},        // idle: nothing to learn
		{8, 0, 0.3, 8, 12},     // at the limit, no queue: slow start, +half
		{12, 0, 0.4, 12, 18},   // again
		{16, 2, 0.5, 18, 16},   // waiting right after it grew: what runs of ours, at once
		{16, 0, 0.5, 16, 16},   // room again, but calm for 1 reading only
		{16, 0, 0.5, 16, 16},   // 2
		{16, 0, 0.5, 16, 16},   // 3
		{16, 0, 0.5, 16, 16},   // 4
		{16, 0, 0.5, 16, 16},   // 5
		{16, 0, 0.5, 16, 16},   // 6
		{16, 0, 0.5, 16, 16},   // 7
		{16, 0, 0.5, 16, 17},   // 8: probe +1
		{16, 0, 0.5, 17, 17},   // the server runs 16 of our 17: one ended that we have not seen; no growth
		{17, 1, 0.6, 17, 17},   // one reading with waiting, not after a growth: caught between steps
		{17, 0, 0.96, 17, 17},  // KV past the threshold: no growth
		{17, 1, 0.97, 17, 17},  // KV past the threshold and one reading with waiting: still a transient
		{17, 1, 0.97, 17, 16},  // twice: queued
		{16, 0, 0.5, 16, 16},   // calm
		{200, 50, 0.5, 20, 16}, // other clients' requests: one reading proves nothing
		{200, 50, 0.5, 20, 1},  // twice: ours less the queue, at least 1
		{200, 60, 0.5, 80, 20}, // queued again: what runs of ours, up as well as down
	}
	for i, s := range steps {
		l.observe(vllmmetrics.Gauges{Running: s.running, Waiting: s.waiting, KVCache: s.kv}, s.inFlight, 0)
		if l.limit != s.want {
			t.Fatalf("step %d: %+v: limit %d, want %d", i, s, l.limit, s.want)
		}
	}
}

// TestLearnerCountsReservedSlotsAsRunning: slots granted to waiting
// buckets whose deliveries have not come yet (on RocketMQ, until a
// suspended message's delay ends) count as running on the server when
// the limit may grow, and not among ours the server runs when it queues.
func TestLearnerCountsReservedSlotsAsRunning(t *testing.T) {
	l := newLearner(learnCeiling, DefaultKVThreshold)
	steps := []struct {
		running, waiting   float64
		inFlight, reserved int
		want               int
	}{
		{2, 0, 8, 0, 8},    // 8 of ours, the server runs 2: 6 ended there and not yet here
		{2, 0, 8, 6, 12},   // the 6 are reserved, not sent: the limit is reached, +half
		{3, 0, 12, 8, 12},  // 3 + 8 < 12: one sent has ended at the server
		{4, 0, 12, 8, 18},  // 4 + 8: reached again
		{15, 3, 18, 0, 15}, // waiting right after it grew: what runs of ours
		{12, 0, 15, 3, 15}, // room, calm (saturated: it probes after probeAfter readings)
		{12, 2, 15, 1, 15}, // one reading with waiting: a transient
		{12, 2, 15, 1, 12}, // twice: ours sent (15 - 1 reserved) less the 2 waiting
	}
	for i, s := range steps {
		kv := s.running * 0.02 // each running request takes 2 % of the cache: room for 47
		l.observe(vllmmetrics.Gauges{Running: s.running, Waiting: s.waiting, KVCache: kv}, s.inFlight, s.reserved)
		if l.limit != s.want {
			t.Fatalf("step %d: %+v: limit %d, want %d", i, s, l.limit, s.want)
		}
	}
}

// TestLearnerProbesLessOftenWhileTheRoomHolds: a server that runs 10 and
// queues the 11th. Each probe that finds it full doubles the calm
// readings before the next, up to probeMax; a probe it runs without a
// queue brings the wait back to probeAfter.
func TestLearnerProbesLessOftenWhileTheRoomHolds(t *testing.T) {
	l := newLearner(learnCeiling, DefaultKVThreshold)
	l.limit, l.saturated = 10, true
	full := vllmmetrics.Gauges{Running: 10, KVCache: 0.5}
	// calmUntilProbe feeds readings of a full server until the limit
	// probes above 10, and counts them.
	calmUntilProbe := func() int {
		for n := 1; n <= 1000; n++ {
			if l.observe(full, l.limit, 0) {
				return n
			}
		}
		t.Fatal("no probe in 1000 readings")
		return 0
	}
	for i, want := range []int{8, 16, 32, 64, 64} {
		if got := calmUntilProbe(); got != want || l.limit != 11 {
			t.Fatalf("probe %d after %d readings (limit %d), want after %d (limit 11)", i, got, l.limit, want)
		}
		// Right after it: one of ours waits at the server.
		l.observe(vllmmetrics.Gauges{Running: 10, Waiting: 1, KVCache: 0.5}, 11, 0)
		if l.limit != 10 {
			t.Fatalf("probe %d overshot: limit %d, want 10", i, l.limit)
		}
	}
	// The server's room grew: the next probe runs without a queue.
	calmUntilProbe()
	l.observe(vllmmetrics.Gauges{Running: 11, KVCache: 0.5}, 11, 0)
	full.Running = 11
	if got := 1 + calmUntilProbe(); got != probeAfter || l.limit != 12 { // 1: the reading that found room
		t.Fatalf("after a probe that held: the next after %d readings (limit %d), want %d (limit 12)", got, l.limit, probeAfter)
	}
}

// TestLearnerSlowStartStopsAtTheCachesRoom: 8 running fill 80 % of the
// cache, so 10 fill 100 % and the threshold (95 %) is passed at the
// tenth: slow start goes to 10, not 12, and grows no more.
func TestLearnerSlowStartStopsAtTheCachesRoom(t *testing.T) {
	l := newLearner(learnCeiling, DefaultKVThreshold)
	for i, r := range []struct {
		running, kv float64
		want        int
	}{{8, 0.8, 10}, {10, 1, 10}, {10, 1, 10}} {
		l.observe(vllmmetrics.Gauges{Running: r.running, KVCache: r.kv}, l.limit, 0)
		if l.limit != r.want {
			t.Fatalf("reading %d (%v running, KV %v): limit %d, want %d", i, r.running, r.kv, l.limit, r.want)
		}
	}
}

// TestLearnerCeiling: MaxConcurrency caps the learned limit.
func TestLearnerCeiling(t *testing.T) {
	l := newLearner(10, DefaultKVThreshold)
	for _, want := range []int{8, 10, 10} { // slow start, capped
		if l.limit != want {
			t.Fatalf("limit %d, want %d", l.limit, want)
		}
		l.observe(vllmmetrics.Gauges{Running: float64(l.limit)}, l.limit, 0)
	}
}

// fakeVLLM serves /metrics from a server that runs at most seqs requests
// and queues the rest: the pool's in-flight count is its load.
type fakeVLLM struct {
	seqs  int
	kv    float64 // KV-cache usage at a full batch
	load  func() int
	fail  atomic.Bool
	reads atomic.Int64
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		w.WriteHeader(http.StatusOK) // /health
		return
	}
	f.reads.Add(1)
	if f.fail.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	n := f.load()
	running, waiting := min(n, f.seqs), max(n-f.seqs, 0)
	fmt.Fprintf(w, "vllm:num_requests_running{model_name=\"m\"} %d\nvllm:num_requests_waiting{model_name=\"m\"} %d\nvllm:kv_cache_usage_perc{model_name=\"m\"} %g\n",
		running, waiting, f.kv*float64(running)/float64(f.seqs))
}

// TestLearnedLimitConverges: against a server of 12 sequences and a
// client that always wants more, the limit settles at 12; when the
// metrics stop answering it falls back to max_concurrency, and the log
// and the stats say so; when they answer again it is learned again.
func TestLearnedLimitConverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p *Pool
		f := &fakeVLLM{seqs: 12, kv: 1, load: func() int { return p.Stats()[0].InFlight }}
		logs := &logRecorder{}
		var err error
		p, err = NewPool(Config{Upstreams: []UpstreamConfig{{URL: "http://up", Models: []string{"m"}, MaxConcurrency: 30}},
			Transport: inProcess{f}, Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var held []*slot
		fill := func() { // a client whose requests all end, then takes every slot it may
			mu.Lock()
			defer mu.Unlock()
			for _, s := range held {
				s.Release()
			}
			held = held[:0]
			for {
				s := p.acquire("m", nil, false)
				if s == nil {
					return
				}
				s.take() // its call starts: the fake server counts it running
				held = append(held, s)
			}
		}
		var limits []int
		for range 12 {
			fill()
			time.Sleep(DefaultMetricsInterval)
			synctest.Wait()
			limits = append(limits, p.Stats()[0].Limit)
		}
		// Start's first reading finds an idle server: 8; full at 8,
		// with the cache two thirds full, it grows by half to 12, where
		// the full cache stops it.
		st := p.Stats()[0]
		if st.Room != RoomMetrics || st.Limit != 12 {
			t.Fatalf("after 3 s: %+v (limits %v), want room metrics, limit 12", st, limits)
		}
		if want := slices.Repeat([]int{12}, 12); !slices.Equal(limits, want) {
			t.Fatalf("limits %v, want %v", limits, want)
		}
		f.fail.Store(true)
		time.Sleep(3 * DefaultMetricsInterval)
		synctest.Wait()
		if st := p.Stats()[0]; st.Room != RoomFallback || st.Limit != 30 {
			t.Fatalf("metrics failing: %+v, want room fallback, limit 30", st)
		}
		if !logs.has("upstream metrics unreadable: its limit falls back to max_concurrency") {
			t.Fatalf("no fallback logged: %q", logs.String())
		}
		f.fail.Store(false)
		time.Sleep(2 * DefaultMetricsInterval)
		synctest.Wait()
		if st := p.Stats()[0]; st.Room != RoomMetrics || st.Limit > 13 {
			t.Fatalf("metrics back: %+v, want room metrics, limit about 12", st)
		}
		mu.Lock()
		for _, s := range held {
			s.Release()
		}
		mu.Unlock()
	})
}

// TestNoMetricsFallsBack: a server without /metrics runs at
// DefaultMaxConcurrency when no max_concurrency is set.
func TestNoMetricsFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" {
				http.NotFound(w, r)
			}
		})
		p, err := NewPool(Config{Upstreams: []UpstreamConfig{{URL: "http://up", Models: []string{"m"}}}, Transport: inProcess{h},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * DefaultMetricsInterval)
		synctest.Wait()
		if st := p.Stats()[0]; st.Room != RoomFallback || st.Limit != DefaultMaxConcurrency {
			t.Fatalf("%+v, want room fallback, limit %d", st, DefaultMaxConcurrency)
		}
	})
}

// logRecorder keeps what a logger writes.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecorder) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logRecorder) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logRecorder) has(msg string) bool { return strings.Contains(l.String(), msg) }

// TestLearnedLimitSlowStart: with cache to spare (KV half used at a full
// batch), the limit starts at 8, grows by half while reached, and
// settles at the server's 12 sequences at the first reading with a queue
// after it grew.
func TestLearnedLimitSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p *Pool
		f := &fakeVLLM{seqs: 12, kv: 0.5, load: func() int { return p.Stats()[0].InFlight }}
		var err error
		p, err = NewPool(Config{Upstreams: []UpstreamConfig{{URL: "http://up", Models: []string{"m"}}},
			Transport: inProcess{f}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		// The first reading comes before any request: the limit is 8.
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultMetricsInterval)
		synctest.Wait()
		var held []*slot
		var limits []int
		for range 8 {
			for _, s := range held {
				s.Release()
			}
			held = held[:0]
			for s := p.acquire("m", nil, false); s != nil; s = p.acquire("m", nil, false) {
				s.take() // its call starts: the fake server counts it running
				held = append(held, s)
			}
			time.Sleep(DefaultMetricsInterval)
			synctest.Wait()
			limits = append(limits, p.Stats()[0].Limit)
		}
		if want := []int{12, 18, 12, 12, 12, 12, 12, 12}; !slices.Equal(limits, want) {
			t.Fatalf("limits %v, want %v", limits, want)
		}
		for _, s := range held {
			s.Release()
		}
	})
}
