package admin

import (
	"testing"

	"github.com/pacegate/pacegate/consume/upstream"
)

func TestUpstreamsShowRouting(t *testing.T) {
	f := newFixture(t)
	f.h = New(Config{Token: testToken, Table: f.table, Pacer: f.pacer, Buckets: f.queue, Logger: discard(),
		Upstreams: func() []upstream.UpstreamStat {
			return []upstream.UpstreamStat{{URL: "http://u1", Healthy: true, InFlight: 2, Limit: 8, Room: "metrics", MaxConcurrency: 64,
				Models: []string{"m"}, Routed: map[string]uint64{"prefix": 9, "miss": 3}, PromptTokens: 3000, CachedTokens: 2000,
				IndexBlocks: 12, IndexCapacity: 4096}}
		}})
	code, body := f.do("GET", "/admin/upstreams", "")
	want := `{"object":"list","data":[{"url":"http://u1","healthy":true,"in_flight":2,"limit":8,"room":"metrics","max_concurrency":64,` +
		`"vllm_running":0,"vllm_waiting":0,"vllm_kv_cache_usage":0,"errors":0,"models":["m"],` +
		`"routing":{"routed":{"load":0,"miss":3,"prefix":9},"prompt_tokens":3000,"cached_tokens":2000,"prefix_cache_hit_ratio":0.667,"index_blocks":12,"index_capacity":4096}}]}` + "\n"
	if code != 200 || body != want {
		t.Fatalf("GET /admin/upstreams = %d\n%s\nwant\n%s", code, body, want)
	}
}
