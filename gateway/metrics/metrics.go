package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Defaults of the cardinality caps.
const (
	DefaultMaxTenants = 100
	DefaultMaxModels  = 100
	DefaultTopK       = 20
	// DefaultAggregateEvery bounds the cost of the per-model aggregates
	// (a pass over every non-empty bucket) to one per 10 s.
	DefaultAggregateEvery = 10 * time.Second
)

// Config sizes the metrics and names the state sources read at scrape
// time. Every source is optional: a nil source exports nothing.
type Config struct {
	// MaxTenants caps distinct tenant label values (first seen first);
	// the rest are reported as tenant="_other". Zero means
	// DefaultMaxTenants.
	MaxTenants int
	// MaxModels caps distinct model label values the same way. Zero means
	// DefaultMaxModels.
	MaxModels int
	// TopK is how many buckets, by backlog, get per-bucket series at each
	// scrape. Zero means DefaultTopK; negative means none.
	TopK int
	// AggregateEvery is the longest the per-model bucket aggregates are
	// reused before a new pass over every non-empty bucket. Zero means
	// DefaultAggregateEvery.
	AggregateEvery time.Duration

	Buckets   BucketSource
	Upstreams UpstreamSource
	Factors   FactorSource
	Fairness  FairnessSource
	// Models lists the models whose column factor is exported. Nil means
	// none (the global factor is still exported).
	Models func() []string
}

// Metrics holds pacegate's collectors in a private registry. It is safe
// for concurrent use and its observer methods never block on I/O. Make
// it with [New].
type Metrics struct {
	reg     *prometheus.Registry
	tenants *labelSet
	models  *labelSet
	events
	seriesCache
}

// New registers every collector in a new registry, together with the Go
// runtime and process collectors.
func New(cfg Config) *Metrics {
	cfg = withDefaults(cfg)
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		tenants: newLabelSet(cfg.MaxTenants),
		models:  newLabelSet(cfg.MaxModels),
		events:  newEvents(),
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.events.register(m.reg)
	m.reg.MustRegister(&stateCollector{cfg: cfg, models: m.models})
	return m
}

func withDefaults(cfg Config) Config {
	if cfg.MaxTenants <= 0 {
		cfg.MaxTenants = DefaultMaxTenants
	}
	if cfg.MaxModels <= 0 {
		cfg.MaxModels = DefaultMaxModels
	}
	if cfg.TopK == 0 {
		cfg.TopK = DefaultTopK
	}
	if cfg.AggregateEvery <= 0 {
		cfg.AggregateEvery = DefaultAggregateEvery
	}
	return cfg
}

// Registry returns the registry, e.g. to add collectors in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
