package vllmsim

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// AbortBuffer is the capacity of the [Server.Aborts] channel.
const AbortBuffer = 1024

// Server is the simulated vLLM server, an http.Handler. Create it with
// [New]; the zero value is not usable. It is safe for concurrent use.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	started time.Time
	aborts  chan Abort
	store   *responseStore

	bgCtx    context.Context // ends background responses (Close)
	bgCancel context.CancelFunc
	bgMu     sync.Mutex // guards bgClosed and bg.Add; never held with mu
	bgClosed bool
	bg       sync.WaitGroup // background response goroutines

	requests, completed, aborted, failed atomic.Int64
	promptTokens, genTokens              atomic.Int64
	prefixQueries, prefixHits            atomic.Int64 // prompt tokens looked up in cache, and found
	itlNanos, itlTokens                  atomic.Int64 // gaps between two tokens of a request: their sum and number

	cache *prefixCache // nil: prefix caching off; its own lock is never held with mu

	mu       sync.Mutex // guards the fields below
	ttft     time.Duration
	itl      time.Duration
	running  int
	stepEnd  time.Time     // when the engine's last step reckoned ends; zero: stopped (steps.go)
	step     time.Duration // that step's length
	queue    []*waiter     // FIFO of requests waiting for a running slot
	load     *Load
	fail     *Failure
	failLeft int   // requests left for fail when fail.Count > 0
	ruleSeen []int // per Config.Faults rule, the matching requests seen
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	bgCtx, bgCancel := context.WithCancel(context.Background())
	s := &Server{
		bgCtx:    bgCtx,
		bgCancel: bgCancel,
		cfg:      cfg,
		started:  time.Now(),
		aborts:   make(chan Abort, AbortBuffer),
		ttft:     cfg.TTFT,
		itl:      cfg.ITL,
		ruleSeen: make([]int, len(cfg.Faults)),
		store:    newResponseStore(cfg.MaxStoredResponses),
	}
	if cfg.PrefixCacheTokens >= BlockSize {
		s.cache = newPrefixCache(cfg.PrefixCacheTokens)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.generate(true))
	mux.HandleFunc("POST /v1/completions", s.generate(false))
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("GET /v1/responses/{id}", s.getResponse)
	mux.HandleFunc("POST /v1/responses/{id}/cancel", s.cancelResponse)
	mux.HandleFunc("POST /v1/embeddings", s.embeddings)
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.countMessageTokens)
	for _, p := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		mux.HandleFunc("POST "+p, s.rerank)
	}
	mux.HandleFunc("POST /score", s.score)
	mux.HandleFunc("POST /v1/score", s.score)
	mux.HandleFunc("POST /tokenize", s.tokenize)
	mux.HandleFunc("POST /detokenize", s.detokenize)
	mux.HandleFunc("POST /v1/audio/transcriptions", s.audio(false))
	mux.HandleFunc("POST /v1/audio/translations", s.audio(true))
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("/", s.notFound)
	s.mux = mux
	return s
}

// ServeHTTP implements [http.Handler].
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns the counters and the real (not overridden) gauges.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	running, waiting := s.running, len(s.queue)
	s.mu.Unlock()
	return Stats{
		Requests:  s.requests.Load(),
		Completed: s.completed.Load(),
		Aborted:   s.aborted.Load(),
		Failed:    s.failed.Load(),
		Running:   int64(running),
		Waiting:   int64(waiting),

		PrefixCacheQueries: s.prefixQueries.Load(),
		PrefixCacheHits:    s.prefixHits.Load(),
	}
}

// Aborts reports each aborted request. The channel holds AbortBuffer
// reports; when it is full further reports are dropped (Stats.Aborted
// still counts them), so a test that never reads it cannot stall the
// simulator.
func (s *Server) Aborts() <-chan Abort { return s.aborts }

// SetLoad overrides the gauges /metrics reports; nil restores the real
// values.
func (s *Server) SetLoad(l *Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l != nil {
		c := *l
		l = &c
	}
	s.load = l
}

// InjectFailure makes the next f.Count generation requests (all of them
// when f.Count is 0) fail as f says. It replaces an earlier injection.
func (s *Server) InjectFailure(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.failLeft = &f, f.Count
}

// ClearFailures ends InjectFailure.
func (s *Server) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.failLeft = nil, 0
}

// SetLatency changes TTFT for requests that start running from now on,
// and ITL for them and for the engine's steps reckoned from now on
// (negative means 0).
func (s *Server) SetLatency(ttft, itl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttft, s.itl = max(ttft, 0), max(itl, 0)
}

func (s *Server) latency() (ttft, itl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttft, s.itl
}

// takeFailure returns the failure planned for this request, if any, and
// consumes one use of the injected failure.
func (s *Server) takeFailure(r *http.Request) Failure {
	if st := parseStatus(r.Header.Get("X-Sim-Fail-Status")); st > 0 {
		return Failure{StatusBeforeFirstByte: st}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail == nil {
		return Failure{}
	}
	f := *s.fail
	if s.fail.Count > 0 {
		if s.failLeft--; s.failLeft <= 0 {
			s.fail = nil
		}
	}
	return f
}

func (s *Server) abort(id string, queued bool) {
	s.aborted.Add(1)
	select {
	case s.aborts <- Abort{ID: id, At: time.Now(), Queued: queued}:
	default: // full: documented drop
	}
}
