package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacegate/pacegate/policy"
)

// Histogram buckets in seconds. Queue waits span from immediate release
// to max_wait (tens of seconds); TTFT from tens of milliseconds to
// minutes on a loaded pool. A request released at once waits a few
// microseconds: the queue's own cost, whose p99 is meant to stay under
// 20 µs, so the low end resolves it (10, 20, 50 µs) rather than lumping
// every prompt release under 5 ms.
var (
	queueWaitBuckets = []float64{10e-6, 20e-6, 50e-6, 100e-6, 250e-6, 0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	ttftBuckets      = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
)

// events are the metrics updated by observer calls.
type events struct {
	requests  *prometheus.CounterVec
	rejected  *prometheus.CounterVec
	queueWait *prometheus.HistogramVec
	ttft      *prometheus.HistogramVec
	released  *prometheus.CounterVec
	suspends  *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	panics    *prometheus.CounterVec
	upstream  *prometheus.CounterVec
	upErrors  *prometheus.CounterVec
}

func newEvents() events {
	return events{
		requests: counter("pacegate_requests_total",
			"Generation requests by tenant, model and outcome.", "tenant", "model", "outcome"),
		rejected: counter("pacegate_rejected_total",
			"Requests answered 429, by tenant, model and policy reason.", "tenant", "model", "reason"),
		queueWait: histogram("pacegate_queue_wait_seconds",
			"Time from admission to release to the model pool.", queueWaitBuckets),
		ttft: histogram("pacegate_time_to_first_token_seconds",
			"Time from admission to the first response byte.", ttftBuckets),
		released: counter("pacegate_released_total",
			"Requests released from their bucket to the model pool.", "model"),
		suspends: counter("pacegate_suspends_total",
			"Times a bucket was suspended, by reason (pace, capacity, ...).", "model", "reason"),
		dropped: counter("pacegate_dropped_total",
			"Queued requests dropped before release, by reason (client_gone, expired, ...).", "model", "reason"),
		panics: counter("pacegate_consumer_panics_total",
			"Deliveries whose handling panicked.", "model"),
		upstream: counter("pacegate_upstream_responses_total",
			"Upstream responses by upstream and HTTP status code.", "upstream", "code"),
		upErrors: counter("pacegate_upstream_errors_total",
			"Upstream calls that failed: no response, or a response that broke off.", "upstream"),
	}
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"model"})
}

func (e *events) register(r prometheus.Registerer) {
	r.MustRegister(e.requests, e.rejected, e.queueWait, e.ttft, e.released, e.suspends, e.dropped, e.panics, e.upstream, e.upErrors)
}

// Request implements [gateway.Observer.Request].
func (m *Metrics) Request(tenant, model, outcome string) {
	m.requests.WithLabelValues(m.tenants.value(tenant), m.models.value(model), outcome).Inc()
}

// Rejected implements [gateway.Observer.Rejected].
func (m *Metrics) Rejected(tenant, model, reason string) {
	m.rejected.WithLabelValues(m.tenants.value(tenant), m.models.value(model), reason).Inc()
}

// QueueWait implements [gateway.Observer.QueueWait].
func (m *Metrics) QueueWait(_, model string, d time.Duration) {
	m.model(model).queueWait.Observe(d.Seconds())
}

// TTFT implements [gateway.Observer.TTFT].
func (m *Metrics) TTFT(_, model string, d time.Duration) {
	m.model(model).ttft.Observe(d.Seconds())
}

// Released implements [consume.Observer.Released]. The queue wait is
// recorded from the gateway's side ([Metrics.QueueWait]), which sees
// every request once, so it is not observed twice here.
func (m *Metrics) Released(k policy.Key, _ time.Duration) {
	m.model(k.Model).released.Inc()
}

// Suspended implements [consume.Observer.Suspended].
func (m *Metrics) Suspended(k policy.Key, _ time.Duration, reason string) {
	m.suspends.WithLabelValues(m.models.value(k.Model), reason).Inc()
}

// Dropped implements [consume.Observer.Dropped].
func (m *Metrics) Dropped(k policy.Key, reason string) {
	m.dropped.WithLabelValues(m.models.value(k.Model), reason).Inc()
}

// Panicked implements [consume.Observer.Panicked].
func (m *Metrics) Panicked(k policy.Key) {
	m.panics.WithLabelValues(m.models.value(k.Model)).Inc()
}

// Result implements [upstream.Observer.Result]. Upstreams come from the
// config, so their label is bounded; so is the status code.
func (m *Metrics) Result(upstream string, status int, err error) {
	if status > 0 {
		m.upstreamResponses(upstream, status).Inc()
	}
	if err != nil {
		m.upErrors.WithLabelValues(upstream).Inc()
	}
}
