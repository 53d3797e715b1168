package admin

import (
	"net/http"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream"
)

// GET /admin/upstreams shows each upstream's limit and where it comes
// from: learned from its metrics, or max_concurrency while they cannot
// be read.
func TestGetUpstreams(t *testing.T) {
	f := newFixture(t)
	down := time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	f.h = New(Config{Token: testToken, Table: f.table, Pacer: f.pacer, Buckets: f.queue, Logger: discard(),
		Upstreams: func() []upstream.UpstreamStat {
			return []upstream.UpstreamStat{
				{URL: "http://a:8000", InFlight: 10, Reserved: 3, MaxConcurrency: 64, Limit: 10, Room: upstream.RoomMetrics,
					Running: 10, Waiting: 0, KVCache: 0.81234, StepSeconds: 0.0050004, StepGrowth: 1.0 / 9, Healthy: true, Models: []string{llama}},
				{URL: "http://b:8000", MaxConcurrency: 64, Limit: 64, Room: upstream.RoomFallback, Errors: 3, DownUntil: down},
			}
		}})
	noRouting := `"routing":{"routed":{"load":0,"miss":0,"prefix":0},"prompt_tokens":0,"cached_tokens":0,"prefix_cache_hit_ratio":0,"index_blocks":0,"index_capacity":0}`
	f.expect(http.MethodGet, "/admin/upstreams", "", http.StatusOK,
		`{"object":"list","data":[`+
			`{"url":"http://a:8000","healthy":true,"in_flight":10,"reserved":3,"limit":10,"room":"metrics","max_concurrency":64,"vllm_running":10,"vllm_waiting":0,"vllm_kv_cache_usage":0.812,"vllm_step_ms":5,"vllm_step_growth":0.111,"errors":0,"models":["meta-llama/Llama-3-8B"],`+noRouting+`},`+
			`{"url":"http://b:8000","healthy":false,"in_flight":0,"reserved":0,"limit":64,"room":"fallback","max_concurrency":64,"vllm_running":0,"vllm_waiting":0,"vllm_kv_cache_usage":0,"vllm_step_ms":0,"vllm_step_growth":0,"errors":3,"down_until":"2026-01-01T00:00:05Z","models":[],`+noRouting+`}]}`)
}

func TestUpstreamsShowRouting(t *testing.T) {
	f := newFixture(t)
	f.h = New(Config{Token: testToken, Table: f.table, Pacer: f.pacer, Buckets: f.queue, Logger: discard(),
		Upstreams: func() []upstream.UpstreamStat {
			return []upstream.UpstreamStat{{URL: "http://u1", Healthy: true, InFlight: 2, Limit: 8, Room: "metrics", MaxConcurrency: 64,
				Models: []string{"m"}, Routed: map[string]uint64{"prefix": 9, "miss": 3}, PromptTokens: 3000, CachedTokens: 2000,
				IndexBlocks: 12, IndexCapacity: 4096}}
		}})
	code, body := f.do("GET", "/admin/upstreams", "")
	want := `{"object":"list","data":[{"url":"http://u1","healthy":true,"in_flight":2,"reserved":0,"limit":8,"room":"metrics","max_concurrency":64,` +
		`"vllm_running":0,"vllm_waiting":0,"vllm_kv_cache_usage":0,"vllm_step_ms":0,"vllm_step_growth":0,"errors":0,"models":["m"],` +
		`"routing":{"routed":{"load":0,"miss":3,"prefix":9},"prompt_tokens":3000,"cached_tokens":2000,"prefix_cache_hit_ratio":0.667,"index_blocks":12,"index_capacity":4096}}]}` + "\n"
	if code != 200 || body != want {
		t.Fatalf("GET /admin/upstreams = %d\n%s\nwant\n%s", code, body, want)
	}
}
