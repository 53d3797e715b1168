package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// simModel is the model every scenario asks for.
const simModel = "sim-model"

// upstreamSim is a vllmsim on a loopback socket, wrapped to count
// in-flight generation requests (running + waiting at the "GPU") and,
// optionally, to timestamp every content chunk it writes.
type upstreamSim struct {
	*vllmsim.Server
	URL string
	srv *http.Server

	inflight, peak atomic.Int64
	record         bool

	mu     sync.Mutex
	chunks map[string]simTrace // by X-Request-Id
}

// simTrace is what the sim saw of one recorded request: when it arrived
// and when each of its content chunks was written.
type simTrace struct {
	arrived time.Time
	writes  []time.Time
}

// startSim serves a new vllmsim on 127.0.0.1. With record set it keeps
// per-request chunk write times (see chunkTimes).
func startSim(cfg vllmsim.Config, record bool) (*upstreamSim, error) {
	if len(cfg.Models) == 0 {
		cfg.Models = []string{simModel}
	}
	s := &upstreamSim{Server: vllmsim.New(cfg), record: record, chunks: map[string]simTrace{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go pprof.Do(context.Background(), pprof.Labels("proc", "sim"), func(context.Context) { _ = s.srv.Serve(ln) })
	return s, nil
}

// Close stops the listener and cuts the connections still open.
func (s *upstreamSim) Close() { _ = s.srv.Close() }

// drain stops the listener and lets the requests in flight finish, as a
// server shut down gracefully does; it returns when they have (or after
// a minute).
func (s *upstreamSim) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

func (s *upstreamSim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.Server.ServeHTTP(w, r)
		return
	}
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	if s.record {
		w = &chunkRecorder{ResponseWriter: w, sim: s, id: r.Header.Get("X-Request-Id"), arrived: time.Now()}
	}
	s.Server.ServeHTTP(w, r)
}

// resetPeak sets the peak back to the current in-flight count.
func (s *upstreamSim) resetPeak() { s.peak.Store(s.inflight.Load()) }

// chunkTimes returns and forgets what the sim recorded of every request.
func (s *upstreamSim) chunkTimes() map[string]simTrace {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chunks
	s.chunks = map[string]simTrace{}
	return c
}

// chunkRecorder timestamps the writes of content chunks.
type chunkRecorder struct {
	http.ResponseWriter
	sim     *upstreamSim
	id      string
	arrived time.Time
	times   []time.Time
}

func (c *chunkRecorder) Write(p []byte) (int, error) {
	if bytes.Contains(p, contentMark) {
		c.times = append(c.times, time.Now())
	}
	n, err := c.ResponseWriter.Write(p)
	if bytes.Contains(p, []byte("[DONE]")) && c.id != "" {
		c.sim.mu.Lock()
		c.sim.chunks[c.id] = simTrace{arrived: c.arrived, writes: c.times}
		c.sim.mu.Unlock()
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (c *chunkRecorder) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Flush forwards to the wrapped writer.
func (c *chunkRecorder) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

// drainAborts empties the sim's abort channel.
func (s *upstreamSim) drainAborts() {
	for {
		select {
		case <-s.Aborts():
		default:
			return
		}
	}
}

// waitIdle waits until nothing is in flight at the sim or ctx is done.
func (s *upstreamSim) waitIdle(ctx context.Context) {
	for s.inflight.Load() > 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}
