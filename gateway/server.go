package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/policy"
)

// Pool is what the gateway needs from the upstream pool.
type Pool interface {
	Models() []string
	Serves(model string) bool
	Ready() bool
}

// Admitter decides admission and settles what it reserved (implemented
// by *policy.Admitter on one replica and by *cluster.Admitter across
// replicas sharing a store).
type Admitter interface {
	Admit(tenant *policy.Tenant, model string, estTokens int64) policy.Admission
	Reconcile(r policy.Reservation, actualTokens int64)
	Refund(r policy.Reservation)
}

// Forwarder sends a request straight to an upstream, outside the queue
// (implemented by *upstream.Pool): direct routes and follow-ups.
type Forwarder interface {
	Forward(ctx context.Context, req *consume.Request, emit consume.Emitter) error
}

// Config wires a Server. Every pointer field is required unless it says
// otherwise.
type Config struct {
	Table    *policy.Table
	Admitter Admitter
	Pacer    *policy.Pacer
	Queue    *consume.Queue
	Pool     Pool
	// BandMaxWait is how long a request of a priority band may wait in its
	// bucket before it gets a 429 queue_full (0: no bound). Nil means no
	// bound for any band.
	BandMaxWait func(policy.Priority) time.Duration
	// Direct forwards direct routes (tokenize, count_tokens) and
	// follow-ups of stored responses. Nil means the Pool, when it is a
	// Forwarder; otherwise those routes answer 503.
	Direct Forwarder
	// AffinitySize bounds the stored-response ids remembered for
	// follow-ups (least recently used go first). Zero means 65536.
	AffinitySize int
	// AffinityTTL forgets an id unused for this long. Zero means 1 h.
	AffinityTTL time.Duration
	// Models are served in addition to what the pool discovers.
	Models []string
	// MaxBodyBytes bounds a request body. Zero means 8 MiB.
	MaxBodyBytes int64
	// RequestTimeout bounds a request from admission to its last byte.
	// Zero means 120 s.
	RequestTimeout time.Duration
	// Heartbeat is the interval of ": queued" comments on a waiting
	// stream. Zero means 5 s.
	Heartbeat time.Duration
	// WriteStallTimeout bounds each write and flush of a response: a
	// client that stops reading while keeping its connection is cut after
	// it, and its upstream call aborted. Zero means no limit.
	WriteStallTimeout time.Duration
	// PrefixBytes is how much of a generation request's rendered prompt is
	// hashed for prefix routing (consume.Request.Prefix). Zero means none:
	// the pool routes by load alone.
	PrefixBytes int
	// DefaultCompletionTokens is reserved against the TPM window when a
	// request sets no max_tokens. Zero means 256.
	DefaultCompletionTokens int64
	// Observer receives metrics events. Nil means none.
	Observer Observer
	// Logger logs one line per request. Nil means slog.Default().
	Logger *slog.Logger
	// NewID makes request ids. Nil means UUIDv4.
	NewID func() string
}

// Server is the OpenAI-compatible HTTP handler. It is safe for concurrent
// use.
type Server struct {
	cfg       Config
	router    chi.Router
	withdrawn atomic.Bool // /readyz fails
	draining  atomic.Bool // new generation requests get 503
	// cut is cancelled by Cut; every request's context ends with it,
	// so an upstream call running on a handler's goroutine ends too.
	cut       context.Context
	cutCancel context.CancelFunc
	affinity  *affinity
}

// New returns a Server for cfg, with defaults filled in.
func New(cfg Config) *Server {
	cfg = withDefaults(cfg)
	s := &Server{cfg: cfg, affinity: newAffinity(cfg.AffinitySize, cfg.AffinityTTL)}
	s.cut, s.cutCancel = context.WithCancel(context.Background())
	s.router = s.routes()
	return s
}

func withDefaults(cfg Config) Config {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 120 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 5 * time.Second
	}
	if cfg.DefaultCompletionTokens <= 0 {
		cfg.DefaultCompletionTokens = 256
	}
	if cfg.Direct == nil {
		cfg.Direct, _ = cfg.Pool.(Forwarder)
	}
	if cfg.Direct == nil {
		cfg.Direct = noForwarder{}
	}
	if cfg.AffinitySize <= 0 {
		cfg.AffinitySize = 65536
	}
	if cfg.AffinityTTL <= 0 {
		cfg.AffinityTTL = time.Hour
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewString
	}
	return cfg
}

// ServeHTTP implements [http.Handler].
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Withdraw turns /readyz false ("draining") while every request is still
// served as usual: the first step of a shutdown, which lets load
// balancers stop routing here before the listener closes.
func (s *Server) Withdraw() { s.withdrawn.Store(true) }

// Drain makes the server refuse new generation requests with 503 while the
// ones in flight finish; it implies Withdraw.
func (s *Server) Drain() {
	s.Withdraw()
	s.draining.Store(true)
}

// Cut ends every request still in flight with an explicit error (an SSE
// error event, or a 503 when nothing was sent yet): the end of a shutdown
// grace period. Their upstream calls are cancelled.
func (s *Server) Cut() { s.cutCancel() }

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(requestID(s.cfg.NewID), accessLog(s.cfg.Logger), recoverer(s.cfg.Logger, writePathError))
	s.mount(r)
	r.Get("/v1/models", s.listModels)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		dialectOf(r.URL.Path).writeError(w, &APIError{Status: http.StatusNotFound, Message: "Unknown path " + r.URL.Path + ".", Type: "invalid_request_error", Code: "unknown_url"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		dialectOf(r.URL.Path).writeError(w, &APIError{Status: http.StatusMethodNotAllowed, Message: "Method " + r.Method + " is not allowed on " + r.URL.Path + ".", Type: "invalid_request_error"})
	})
	return r
}

// writePathError writes e in the shape of the path's dialect: the
// recoverer's error writer.
func writePathError(w http.ResponseWriter, r *http.Request, e *APIError) {
	dialectOf(r.URL.Path).writeError(w, e)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// readyz is true when the queue backend works, some upstream is healthy
// with its models known (so /v1/models lists them), and the server is not
// shutting down.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var problems []string
	if s.withdrawn.Load() {
		problems = append(problems, "draining")
	}
	if err := s.cfg.Queue.Ready(ctx); err != nil {
		problems = append(problems, "queue: "+err.Error())
	}
	if !s.cfg.Pool.Ready() {
		problems = append(problems, "upstreams: none healthy with known models")
	}
	if len(problems) > 0 {
		dialectOpenAI.writeError(w, errUnavailable("not ready: "+errors.Join(stringErrs(problems)...).Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ready"}`))
}

func stringErrs(ss []string) []error {
	out := make([]error, len(ss))
	for i, s := range ss {
		out[i] = errors.New(s)
	}
	return out
}

// noForwarder is the Direct of a Server whose pool cannot forward.
type noForwarder struct{}

func (noForwarder) Forward(context.Context, *consume.Request, consume.Emitter) error {
	return fmt.Errorf("%w: no forwarder configured", upstream.ErrUpstreamUnavailable)
}
