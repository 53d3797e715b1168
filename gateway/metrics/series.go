package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// modelSeries are one model label's children of the per-model event
// vectors. Every request observes three of them; a vector's lookup hashes
// its label values and takes the vector's lock each time, a cached child
// is one lock-free map read.
type modelSeries struct {
	queueWait, ttft prometheus.Observer
	released        prometheus.Counter
}

// upstreamCode is one child of pacegate_upstream_responses_total.
type upstreamCode struct {
	upstream string
	code     int
}

// seriesCache holds the children looked up so far. Its keys are bounded
// as the series are: model label values the label set admitted (and
// OtherLabel), and upstreams (from the configuration) by status code.
type seriesCache struct {
	byModel    sync.Map // model label value → *modelSeries
	byUpstream sync.Map // upstreamCode → prometheus.Counter
}

// model returns the series of model, admitting it to the model label
// set as a direct lookup would. A model folded into OtherLabel is not a
// key of its own: the cache grows with the admitted values only.
func (m *Metrics) model(model string) *modelSeries {
	if s, ok := m.byModel.Load(model); ok {
		return s.(*modelSeries)
	}
	v := m.models.value(model)
	if s, ok := m.byModel.Load(v); ok { // folded into OtherLabel
		return s.(*modelSeries)
	}
	s, _ := m.byModel.LoadOrStore(v, &modelSeries{
		queueWait: m.queueWait.WithLabelValues(v),
		ttft:      m.ttft.WithLabelValues(v),
		released:  m.released.WithLabelValues(v),
	})
	return s.(*modelSeries)
}

// upstreamResponses returns the counter of upstream's answers with code.
func (m *Metrics) upstreamResponses(upstream string, code int) prometheus.Counter {
	k := upstreamCode{upstream, code}
	if c, ok := m.byUpstream.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.byUpstream.LoadOrStore(k, m.upstream.WithLabelValues(upstream, strconv.Itoa(code)))
	return c.(prometheus.Counter)
}
