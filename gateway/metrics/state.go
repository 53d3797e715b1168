package metrics

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/policy"
)

// BucketSource lists buckets (implemented by *consume.Queue).
type BucketSource interface {
	List(q consume.ListQuery) ([]consume.BucketStat, int)
}

// UpstreamSource reports the pool (implemented by *upstream.Pool).
type UpstreamSource interface {
	Stats() []upstream.UpstreamStat
}

// FairnessSource reports the fair share of the pool (implemented by
// *fairshare.Scheduler).
type FairnessSource interface {
	Flow(k policy.Key, now time.Time) (fairshare.FlowStat, bool)
	Models(now time.Time) []fairshare.ModelStat
}

// FactorSource reports pacing factors (implemented by *policy.Pacer).
type FactorSource interface {
	GlobalFactor() float64
	ColumnFactor(model string) float64
}

var (
	descBucketBacklog  = desc("pacegate_bucket_backlog", "Queued requests of the top-K buckets by backlog.", "tenant", "model")
	descBucketOldest   = desc("pacegate_bucket_oldest_wait_seconds", "Age of the oldest queued request of the top-K buckets.", "tenant", "model")
	descBucketReleased = desc("pacegate_bucket_released_total", "Requests released by the top-K buckets (series come and go with the top K).", "tenant", "model")
	descBucketSuspends = desc("pacegate_bucket_suspends_total", "Suspensions of the top-K buckets (series come and go with the top K).", "tenant", "model")
	descModelBacklog   = desc("pacegate_model_backlog", "Queued requests over all buckets of a model.", "model")
	descModelBuckets   = desc("pacegate_model_buckets", "Buckets of a model with a backlog, by state (queued, suspended).", "model", "state")
	descModelOldest    = desc("pacegate_model_oldest_wait_seconds", "Age of the oldest queued request of a model.", "model")
	descInFlight       = desc("pacegate_upstream_in_flight", "Requests in flight to an upstream.", "upstream")
	descMaxConc        = desc("pacegate_upstream_max_concurrency", "Configured concurrency cap of an upstream (64 when unset), its limit while its metrics cannot be read.", "upstream")
	descLimit          = desc("pacegate_upstream_limit", "Requests an upstream may run now: learned from its vLLM metrics, or max_concurrency.", "upstream")
	descRoom           = desc("pacegate_upstream_room", "1 for where an upstream's limit comes from: metrics (learned), fallback (its metrics cannot be read: max_concurrency) or fixed.", "upstream", "source")
	descHealthy        = desc("pacegate_upstream_healthy", "1 when the upstream is healthy, 0 while it is marked down.", "upstream")
	descStep           = desc("pacegate_upstream_step_seconds", "Time between two tokens of a stream in a batch of one, from the line fitted to the upstream's vLLM inter-token latency by batch (absent until fitted).", "upstream")
	descStepGrowth     = desc("pacegate_upstream_step_growth", "What each further request in the batch adds to that time, as a fraction of it (absent until fitted).", "upstream")
	descBucketService  = desc("pacegate_bucket_service_tokens", "Attained service of the top-K buckets in the fair share: weighted tokens (prompt + w × completion, over the tenant's weight).", "tenant", "model")
	descBucketShare    = desc("pacegate_bucket_share", "Part (0..1) of its model's recent service that each top-K bucket got among the buckets competing for the pool.", "tenant", "model")
	descJain           = desc("pacegate_model_fairness_jain", "Jain's index over the recent weighted service of the buckets competing for a model's pool: 1 = served alike, 1/n = one got everything.", "model")
	descCompeting      = desc("pacegate_model_competing_buckets", "Buckets that competed for a model's pool within the fairness half-life.", "model")
	descWaiting        = desc("pacegate_capacity_waiting_buckets", "Buckets waiting for a slot of the pool, by model and priority band.", "model", "band")
	descGrants         = desc("pacegate_capacity_grants_total", "Slots of the pool granted to waiting buckets, by model and priority band.", "model", "band")
	descGlobalFactor   = desc("pacegate_global_factor", "Global pacing factor (1 = configured rates).")
	descColumnFactor   = desc("pacegate_column_factor", "Pacing factor of a model's column of buckets.", "model")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// stateCollector reads state at scrape time. Its output is bounded by
// TopK buckets plus a few series per model and per upstream, however many
// buckets exist.
type stateCollector struct {
	cfg    Config
	models *labelSet

	mu     sync.Mutex // guards the aggregate cache; held during a recompute so concurrent scrapes share it
	aggs   map[string]modelAgg
	aggsAt time.Time
}

// Describe implements [prometheus.Collector].
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBucketBacklog, descBucketOldest, descBucketReleased, descBucketSuspends,
		descModelBacklog, descModelBuckets, descModelOldest, descInFlight, descMaxConc, descLimit, descRoom, descHealthy, descStep, descStepGrowth,
		descGlobalFactor, descColumnFactor, descBucketService, descBucketShare, descJain, descCompeting,
		descWaiting, descGrants} {
		ch <- d
	}
	for _, d := range routingDescs {
		ch <- d
	}
}

// Collect implements [prometheus.Collector].
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	if c.cfg.Buckets != nil {
		c.collectBuckets(ch, now)
	}
	if c.cfg.Upstreams != nil {
		c.collectUpstreams(ch)
		c.collectRouting(ch)
	}
	if c.cfg.Factors != nil {
		c.collectFactors(ch)
	}
	if c.cfg.Fairness != nil {
		c.collectFairness(ch, now)
	}
}

var bandLabels = [fairshare.NumBands]string{"high", "normal", "low"}

// collectFairness exports each model's fairness figures. A model folded
// into "_other" is skipped: a sum of Jain's indices would mislead.
func (c *stateCollector) collectFairness(ch chan<- prometheus.Metric, now time.Time) {
	for _, m := range c.cfg.Fairness.Models(now) {
		l := c.models.value(m.Model)
		if l == OtherLabel {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descJain, prometheus.GaugeValue, m.Jain, l)
		ch <- prometheus.MustNewConstMetric(descCompeting, prometheus.GaugeValue, float64(m.Competing), l)
		for b, band := range bandLabels {
			ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(m.Waiting[b]), l, band)
			ch <- prometheus.MustNewConstMetric(descGrants, prometheus.CounterValue, float64(m.Grants[b]), l, band)
		}
	}
}

type modelAgg struct {
	backlog           float64
	queued, suspended float64
	oldest            float64
}

// collectBuckets exports the top-K buckets, read live (a bounded heap
// pass over the buckets), and the per-model aggregates, which need every
// non-empty bucket and are therefore recomputed at most once per
// AggregateEvery, however often Prometheus (or several of them) scrape.
func (c *stateCollector) collectBuckets(ch chan<- prometheus.Metric, now time.Time) {
	if c.cfg.TopK > 0 {
		top, _ := c.cfg.Buckets.List(consume.ListQuery{NonEmpty: true, Limit: c.cfg.TopK})
		for _, st := range top {
			t, m := st.Key.Tenant, st.Key.Model
			ch <- prometheus.MustNewConstMetric(descBucketBacklog, prometheus.GaugeValue, float64(st.Backlog), t, m)
			ch <- prometheus.MustNewConstMetric(descBucketOldest, prometheus.GaugeValue, waitOf(st, now), t, m)
			ch <- prometheus.MustNewConstMetric(descBucketReleased, prometheus.CounterValue, float64(st.Released), t, m)
			ch <- prometheus.MustNewConstMetric(descBucketSuspends, prometheus.CounterValue, float64(st.Suspends), t, m)
			c.collectShare(ch, st.Key, now)
		}
	}
	for m, a := range c.aggregates(now) {
		ch <- prometheus.MustNewConstMetric(descModelBacklog, prometheus.GaugeValue, a.backlog, m)
		ch <- prometheus.MustNewConstMetric(descModelOldest, prometheus.GaugeValue, a.oldest, m)
		ch <- prometheus.MustNewConstMetric(descModelBuckets, prometheus.GaugeValue, a.queued, m, consume.StateQueued)
		ch <- prometheus.MustNewConstMetric(descModelBuckets, prometheus.GaugeValue, a.suspended, m, consume.StateSuspended)
	}
}

// collectShare exports one top-K bucket's fair-share figures.
func (c *stateCollector) collectShare(ch chan<- prometheus.Metric, k policy.Key, now time.Time) {
	if c.cfg.Fairness == nil {
		return
	}
	if f, ok := c.cfg.Fairness.Flow(k, now); ok {
		ch <- prometheus.MustNewConstMetric(descBucketService, prometheus.GaugeValue, f.Counter, k.Tenant, k.Model)
		ch <- prometheus.MustNewConstMetric(descBucketShare, prometheus.GaugeValue, f.Share, k.Tenant, k.Model)
	}
}

func waitOf(st consume.BucketStat, now time.Time) float64 {
	if st.Oldest.IsZero() {
		return 0
	}
	return max(0, now.Sub(st.Oldest).Seconds())
}

// aggregates returns the per-model sums, from the cache when it is
// younger than AggregateEvery. The map is never modified once cached.
func (c *stateCollector) aggregates(now time.Time) map[string]modelAgg {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aggs != nil && now.Sub(c.aggsAt) < c.cfg.AggregateEvery {
		return c.aggs
	}
	items, _ := c.cfg.Buckets.List(consume.ListQuery{NonEmpty: true, Limit: math.MaxInt32})
	aggs := map[string]modelAgg{}
	for _, st := range items {
		model := c.models.value(st.Key.Model)
		a := aggs[model]
		a.backlog += float64(st.Backlog)
		a.oldest = max(a.oldest, waitOf(st, now))
		if st.State == consume.StateSuspended {
			a.suspended++
		} else {
			a.queued++
		}
		aggs[model] = a
	}
	c.aggs, c.aggsAt = aggs, now
	return aggs
}

func (c *stateCollector) collectUpstreams(ch chan<- prometheus.Metric) {
	for _, u := range c.cfg.Upstreams.Stats() {
		healthy := 0.0
		if u.Healthy {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(u.InFlight), u.URL)
		ch <- prometheus.MustNewConstMetric(descMaxConc, prometheus.GaugeValue, float64(u.MaxConcurrency), u.URL)
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(u.Limit), u.URL)
		ch <- prometheus.MustNewConstMetric(descRoom, prometheus.GaugeValue, 1, u.URL, u.Room)
		ch <- prometheus.MustNewConstMetric(descHealthy, prometheus.GaugeValue, healthy, u.URL)
		if u.StepSeconds > 0 {
			ch <- prometheus.MustNewConstMetric(descStep, prometheus.GaugeValue, u.StepSeconds, u.URL)
			ch <- prometheus.MustNewConstMetric(descStepGrowth, prometheus.GaugeValue, u.StepGrowth, u.URL)
		}
	}
}

func (c *stateCollector) collectFactors(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descGlobalFactor, prometheus.GaugeValue, c.cfg.Factors.GlobalFactor())
	if c.cfg.Models == nil {
		return
	}
	seen := map[string]bool{}
	for _, m := range c.cfg.Models() {
		l := c.models.value(m)
		if seen[l] || l == OtherLabel { // a folded model's factor would mislead
			continue
		}
		seen[l] = true
		ch <- prometheus.MustNewConstMetric(descColumnFactor, prometheus.GaugeValue, c.cfg.Factors.ColumnFactor(m), l)
	}
}
