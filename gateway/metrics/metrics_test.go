package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/consumetest"
	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/gateway"
	"github.com/pacegate/pacegate/policy"
)

// The observer interfaces Metrics must satisfy.
var (
	_ gateway.Observer  = (*Metrics)(nil)
	_ consume.Observer  = (*Metrics)(nil)
	_ upstream.Observer = (*Metrics)(nil)
)

// scrape returns the exposition lines starting with one of the prefixes,
// in the registry's (sorted) order.
func scrape(t testing.TB, m *Metrics, prefixes ...string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// A release at once, the queue's own few microseconds, has buckets of
// its own: 15 µs is within 20 µs and not within 10, and a wait of 3 ms
// is told apart from it.
func TestQueueWaitResolvesAPromptRelease(t *testing.T) {
	m := New(Config{MaxTenants: 2, MaxModels: 1})
	m.QueueWait("a", "m1", 15*time.Microsecond)
	m.QueueWait("a", "m1", 3*time.Millisecond)
	want := `pacegate_queue_wait_seconds_bucket{model="m1",le="1e-05"} 0
pacegate_queue_wait_seconds_bucket{model="m1",le="2e-05"} 1
pacegate_queue_wait_seconds_bucket{model="m1",le="5e-05"} 1
pacegate_queue_wait_seconds_bucket{model="m1",le="0.0001"} 1
pacegate_queue_wait_seconds_bucket{model="m1",le="0.00025"} 1
pacegate_queue_wait_seconds_bucket{model="m1",le="0.001"} 1
pacegate_queue_wait_seconds_bucket{model="m1",le="0.005"} 2`
	var lines []string
	for _, le := range []string{"1e-05", "2e-05", "5e-05", "0.0001", "0.00025", "0.001", "0.005"} {
		lines = append(lines, `pacegate_queue_wait_seconds_bucket{model="m1",le="`+le+`"}`)
	}
	if got := scrape(t, m, lines...); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestEventMetrics(t *testing.T) {
	m := New(Config{MaxTenants: 2, MaxModels: 1})
	m.Request("a", "m1", "ok")
	m.Request("a", "m1", "ok")
	m.Request("b", "m1", "rejected")
	m.Request("c", "m1", "ok") // third tenant: folded
	m.Request("d", "m3", "ok") // second model: folded too
	m.Rejected("b", "m1", "RPM_LIMIT")
	m.QueueWait("a", "m1", 300*time.Millisecond)
	m.TTFT("a", "m1", 2*time.Second)
	k := policy.Key{Tenant: "a", Model: "m1"}
	m.Released(k, time.Second)
	m.Suspended(k, time.Second, "pace")
	m.Dropped(k, "client_gone")
	m.Panicked(k)
	m.Result("http://u1", 200, nil)
	m.Result("http://u1", 0, errors.New("refused"))
	m.Result("http://u1", 200, errors.New("stream broke"))
	m.Result("http://u1", 503, nil)
	// Folded: their series are _other's, all three made at the first
	// (a model's series start at 0, as Prometheus advises for known
	// label values).
	for _, model := range []string{"m3", "m4"} {
		m.QueueWait("d", model, time.Second)
		m.Released(policy.Key{Tenant: "d", Model: model}, time.Second)
	}
	want := `pacegate_consumer_panics_total{model="m1"} 1
pacegate_dropped_total{model="m1",reason="client_gone"} 1
pacegate_queue_wait_seconds_sum{model="_other"} 2
pacegate_queue_wait_seconds_count{model="_other"} 2
pacegate_queue_wait_seconds_bucket{model="m1",le="0.25"} 0
pacegate_queue_wait_seconds_bucket{model="m1",le="0.5"} 1
pacegate_queue_wait_seconds_sum{model="m1"} 0.3
pacegate_queue_wait_seconds_count{model="m1"} 1
pacegate_rejected_total{model="m1",reason="RPM_LIMIT",tenant="b"} 1
pacegate_released_total{model="_other"} 2
pacegate_released_total{model="m1"} 1
pacegate_requests_total{model="_other",outcome="ok",tenant="_other"} 1
pacegate_requests_total{model="m1",outcome="ok",tenant="_other"} 1
pacegate_requests_total{model="m1",outcome="ok",tenant="a"} 2
pacegate_requests_total{model="m1",outcome="rejected",tenant="b"} 1
pacegate_suspends_total{model="m1",reason="pace"} 1
pacegate_time_to_first_token_seconds_count{model="_other"} 0
pacegate_time_to_first_token_seconds_bucket{model="m1",le="2.5"} 1
pacegate_time_to_first_token_seconds_count{model="m1"} 1
pacegate_upstream_errors_total{upstream="http://u1"} 2
pacegate_upstream_responses_total{code="200",upstream="http://u1"} 2
pacegate_upstream_responses_total{code="503",upstream="http://u1"} 1`
	got := scrape(t, m, "pacegate_consumer", "pacegate_dropped", "pacegate_queue_wait_seconds_bucket{model=\"m1\",le=\"0.25\"}",
		"pacegate_queue_wait_seconds_bucket{model=\"m1\",le=\"0.5\"}", "pacegate_queue_wait_seconds_sum", "pacegate_queue_wait_seconds_count",
		"pacegate_rejected", "pacegate_released", "pacegate_requests", "pacegate_suspends",
		"pacegate_time_to_first_token_seconds_bucket{model=\"m1\",le=\"2.5\"}", "pacegate_time_to_first_token_seconds_count",
		"pacegate_upstream_")
	if got != want {
		t.Fatalf("scrape:\n%s\nwant:\n%s", got, want)
	}
	var cached []string // the series cache grows with the admitted values only
	m.byModel.Range(func(k, _ any) bool { cached = append(cached, k.(string)); return true })
	slices.Sort(cached)
	if !slices.Equal(cached, []string{OtherLabel, "m1"}) {
		t.Errorf("model series cached for %v, want [_other m1]", cached)
	}
}

type fakeUpstreams []upstream.UpstreamStat

func (f fakeUpstreams) Stats() []upstream.UpstreamStat { return f }

// TestStateMetrics runs in a synctest bubble: the collector reads the
// same virtual clock as the test, so the ages are exact and the aggregate
// cache expires at a known instant.
func TestStateMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buckets := consumetest.New()
		now := time.Now()
		for i, k := range []policy.Key{{Tenant: "a", Model: "m1"}, {Tenant: "a", Model: "m1"}, {Tenant: "a", Model: "m1"}, {Tenant: "b", Model: "m1"}, {Tenant: "b", Model: "m1"}, {Tenant: "c", Model: "m2"}, {Tenant: "d", Model: "m1"}} {
			buckets.Submit(k, now.Add(-time.Duration(10-i)*time.Second))
		}
		buckets.Suspend(policy.Key{Tenant: "b", Model: "m1"}, time.Hour)
		table := policy.NewTable(mustQuotas(t))
		pacer := policy.NewPacer(table)
		pacer.SetColumnFactor("m2", 0.5)
		pacer.SetGlobalFactor(2)
		m := New(Config{TopK: 2, Buckets: buckets, Factors: pacer, Models: func() []string { return []string{"m1", "m2"} },
			Upstreams: fakeUpstreams{{URL: "http://u1", InFlight: 3, MaxConcurrency: 64, Limit: 10, Room: "metrics", Healthy: true, StepSeconds: 0.005, StepGrowth: 0.125},
				{URL: "http://u2", MaxConcurrency: 4, Limit: 4, Room: "fallback"}}})
		got := scrape(t, m, "pacegate_bucket_", "pacegate_model_", "pacegate_upstream_healthy", "pacegate_upstream_in_flight",
			"pacegate_upstream_limit", "pacegate_upstream_max_", "pacegate_upstream_room", "pacegate_upstream_step", "pacegate_global", "pacegate_column")
		want := `pacegate_bucket_backlog{model="m1",tenant="a"} 3
pacegate_bucket_backlog{model="m1",tenant="b"} 2
pacegate_bucket_oldest_wait_seconds{model="m1",tenant="a"} 10
pacegate_bucket_oldest_wait_seconds{model="m1",tenant="b"} 7
pacegate_bucket_released_total{model="m1",tenant="a"} 0
pacegate_bucket_released_total{model="m1",tenant="b"} 0
pacegate_bucket_suspends_total{model="m1",tenant="a"} 0
pacegate_bucket_suspends_total{model="m1",tenant="b"} 1
pacegate_column_factor{model="m1"} 1
pacegate_column_factor{model="m2"} 0.5
pacegate_global_factor 2
pacegate_model_backlog{model="m1"} 6
pacegate_model_backlog{model="m2"} 1
pacegate_model_buckets{model="m1",state="queued"} 2
pacegate_model_buckets{model="m1",state="suspended"} 1
pacegate_model_buckets{model="m2",state="queued"} 1
pacegate_model_buckets{model="m2",state="suspended"} 0
pacegate_model_oldest_wait_seconds{model="m1"} 10
pacegate_model_oldest_wait_seconds{model="m2"} 5
pacegate_upstream_healthy{upstream="http://u1"} 1
pacegate_upstream_healthy{upstream="http://u2"} 0
pacegate_upstream_in_flight{upstream="http://u1"} 3
pacegate_upstream_in_flight{upstream="http://u2"} 0
pacegate_upstream_limit{upstream="http://u1"} 10
pacegate_upstream_limit{upstream="http://u2"} 4
pacegate_upstream_max_concurrency{upstream="http://u1"} 64
pacegate_upstream_max_concurrency{upstream="http://u2"} 4
pacegate_upstream_room{source="fallback",upstream="http://u2"} 1
pacegate_upstream_room{source="metrics",upstream="http://u1"} 1
pacegate_upstream_step_growth{upstream="http://u1"} 0.125
pacegate_upstream_step_seconds{upstream="http://u1"} 0.005`
		if got != want {
			t.Fatalf("scrape:\n%s\nwant:\n%s", got, want)
		}
		// Top-K is live; the per-model aggregates are cached for
		// AggregateEvery, and recomputed once it has passed.
		buckets.Submit(policy.Key{Tenant: "a", Model: "m1"}, now)
		live := []string{`pacegate_bucket_backlog{model="m1",tenant="a"}`, `pacegate_model_backlog{model="m1"}`, `pacegate_model_oldest_wait_seconds{model="m1"}`}
		for _, step := range []struct {
			advance time.Duration
			want    string
		}{
			{0, "4\n6\n10"},
			{DefaultAggregateEvery - time.Millisecond, "4\n6\n10"},
			{time.Millisecond, "4\n7\n20"},
		} {
			time.Sleep(step.advance)
			if got := values(scrape(t, m, live...)); got != step.want {
				t.Fatalf("%v after the first scrape: a/m1 backlog, m1 backlog, m1 oldest wait = %q, want %q",
					time.Since(now), got, step.want)
			}
		}
	})
}

// values returns the sample values of exposition lines, one a line.
func values(lines string) string {
	var out []string
	for _, l := range strings.Split(lines, "\n") {
		out = append(out, l[strings.LastIndexByte(l, ' ')+1:])
	}
	return strings.Join(out, "\n")
}

func mustQuotas(t testing.TB) *policy.Quotas {
	t.Helper()
	f := new(configFile)
	q, err := f.quotas()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestFairnessMetrics(t *testing.T) {
	now := time.Now()
	sched := fairshare.New(time.Hour)
	for _, tenant := range []string{"a", "b"} {
		k := policy.Key{Tenant: tenant, Model: "m1"}
		sched.Join(k, 1, 1, now)
		sched.Grant(k)
		sched.Start(k, 20, now) // 20 tokens each
	}
	sched.Join(policy.Key{Tenant: "c", Model: "m1"}, 2, 1, now) // c (low) still waits
	buckets := consumetest.New()
	buckets.Submit(policy.Key{Tenant: "b", Model: "m1"}, now)
	m := New(Config{TopK: 2, Buckets: buckets, Fairness: sched})
	got := scrape(t, m, "pacegate_model_fairness", "pacegate_model_competing", "pacegate_capacity_", "pacegate_bucket_s")
	// Jain over 20, 20 and c's 0 (it competed and got nothing yet): 1600/(3·800).
	want := `pacegate_bucket_service_tokens{model="m1",tenant="b"} 20
pacegate_bucket_share{model="m1",tenant="b"} 0.5
pacegate_bucket_suspends_total{model="m1",tenant="b"} 0
pacegate_capacity_grants_total{band="high",model="m1"} 0
pacegate_capacity_grants_total{band="low",model="m1"} 0
pacegate_capacity_grants_total{band="normal",model="m1"} 2
pacegate_capacity_waiting_buckets{band="high",model="m1"} 0
pacegate_capacity_waiting_buckets{band="low",model="m1"} 1
pacegate_capacity_waiting_buckets{band="normal",model="m1"} 0
pacegate_model_competing_buckets{model="m1"} 3
pacegate_model_fairness_jain{model="m1"} 0.666666667`
	if got != want {
		t.Fatalf("scrape:\n%s\nwant:\n%s", got, want)
	}
}

func TestRoutingMetrics(t *testing.T) {
	m := New(Config{Upstreams: fakeUpstreams{
		{URL: "http://u1", Routed: map[string]uint64{"prefix": 7, "miss": 2}, PromptTokens: 1000, CachedTokens: 750, IndexBlocks: 40, IndexCapacity: 4096},
		{URL: "http://u2", Routed: map[string]uint64{"load": 1}}}})
	got := scrape(t, m, "pacegate_upstream_routed", "pacegate_upstream_prompt", "pacegate_upstream_cached", "pacegate_upstream_prefix")
	want := `pacegate_upstream_cached_tokens_total{upstream="http://u1"} 750
pacegate_upstream_cached_tokens_total{upstream="http://u2"} 0
pacegate_upstream_prefix_cache_hit_ratio{upstream="http://u1"} 0.75
pacegate_upstream_prefix_cache_hit_ratio{upstream="http://u2"} 0
pacegate_upstream_prefix_index_blocks{upstream="http://u1"} 40
pacegate_upstream_prefix_index_blocks{upstream="http://u2"} 0
pacegate_upstream_prefix_index_capacity_blocks{upstream="http://u1"} 4096
pacegate_upstream_prefix_index_capacity_blocks{upstream="http://u2"} 0
pacegate_upstream_prompt_tokens_total{upstream="http://u1"} 1000
pacegate_upstream_prompt_tokens_total{upstream="http://u2"} 0
pacegate_upstream_routed_total{decision="load",upstream="http://u1"} 0
pacegate_upstream_routed_total{decision="load",upstream="http://u2"} 1
pacegate_upstream_routed_total{decision="miss",upstream="http://u1"} 2
pacegate_upstream_routed_total{decision="miss",upstream="http://u2"} 0
pacegate_upstream_routed_total{decision="prefix",upstream="http://u1"} 7
pacegate_upstream_routed_total{decision="prefix",upstream="http://u2"} 0`
	if got != want {
		t.Fatalf("scrape:\n%s\nwant:\n%s", got, want)
	}
}
