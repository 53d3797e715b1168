package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/consumetest"
	"github.com/pacegate/pacegate/policy"
)

// BenchmarkScrape100k scrapes /metrics with 100,000 non-empty buckets
// (1,000 tenants × 100 models) and checks that the output stays small.
func BenchmarkScrape100k(b *testing.B) {
	buckets := consumetest.New()
	now := time.Now()
	models := make([]string, 100)
	for m := range models {
		models[m] = fmt.Sprintf("m%03d", m)
	}
	for tn := range 1000 {
		for _, m := range models {
			buckets.Submit(policy.Key{Tenant: fmt.Sprintf("t%04d", tn), Model: m}, now)
		}
	}
	table := policy.NewTable(mustQuotas(b))
	m := New(Config{Buckets: buckets, Factors: policy.NewPacer(table), Models: func() []string { return models }})
	for tn := range 1000 { // every tenant has sent requests: only 100 get a label
		m.Request(fmt.Sprintf("t%04d", tn), "m000", "ok")
	}
	var size int
	var series int
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		size = len(body)
		series = strings.Count(string(body), "\npacegate_")
	}
	b.ReportMetric(float64(size)/1024, "KiB/scrape")
	b.ReportMetric(float64(series), "series")
}

// BenchmarkObserveRequest is the metrics a streamed request updates:
// its outcome, queue wait, release, TTFT and the upstream's answer.
func BenchmarkObserveRequest(b *testing.B) {
	m := New(Config{})
	k := policy.Key{Tenant: "acme", Model: "sim-model"}
	b.ReportAllocs()
	for b.Loop() {
		m.QueueWait(k.Tenant, k.Model, 3*time.Millisecond)
		m.Released(k, 3*time.Millisecond)
		m.Result("http://127.0.0.1:8000", 200, nil)
		m.TTFT(k.Tenant, k.Model, 50*time.Millisecond)
		m.Request(k.Tenant, k.Model, "ok")
	}
}
