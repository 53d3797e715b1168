package admin

import (
	"net/http"
	"time"

	"github.com/pacegate/pacegate/consume/upstream"
)

type upstreamsJSON struct {
	Object string         `json:"object"` // "list"
	Data   []upstreamJSON `json:"data"`
}

// upstreamJSON is one upstream: how many requests it may run and why.
type upstreamJSON struct {
	URL      string `json:"url"`
	Healthy  bool   `json:"healthy"`
	InFlight int    `json:"in_flight"`
	// Reserved is how many of InFlight are slots taken and not yet used
	// by a call: mostly granted to a waiting bucket whose delivery has
	// not come yet.
	Reserved int `json:"reserved"`
	// Limit is how many requests it may run now; Room says where that
	// comes from: "metrics" (learned from its vLLM /metrics), "fallback"
	// (its metrics cannot be read: max_concurrency) or "fixed".
	Limit          int    `json:"limit"`
	Room           string `json:"room"`
	MaxConcurrency int    `json:"max_concurrency"`
	// Running, Waiting and KVCache are its last good metrics reading.
	Running float64 `json:"vllm_running"`
	Waiting float64 `json:"vllm_waiting"`
	KVCache float64 `json:"vllm_kv_cache_usage"`
	// StepMS is the time between two tokens of a stream in a batch of
	// one, and StepGrowth the fraction of it each further request in
	// the batch adds, fitted to its inter-token latency (0 until fitted):
	// what keeps a band's max_slowdown.
	StepMS     float64     `json:"vllm_step_ms"`
	StepGrowth float64     `json:"vllm_step_growth"`
	Errors     uint64      `json:"errors"`
	DownUntil  *time.Time  `json:"down_until,omitempty"`
	Models     []string    `json:"models"`
	Routing    routingJSON `json:"routing"`
}

// routingJSON is what prefix routing knows of an upstream.
type routingJSON struct {
	// Routed counts the requests routed to it by decision: prefix, miss
	// (least loaded), load (a fuller holder was skipped).
	Routed map[string]uint64 `json:"routed"`
	// PromptTokens and CachedTokens add up the usage it reported; the
	// ratio is its prefix-cache hit ratio since the start.
	PromptTokens int64   `json:"prompt_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	HitRatio     float64 `json:"prefix_cache_hit_ratio"`
	// IndexBlocks of at most IndexCapacity prompt blocks are remembered
	// for it.
	IndexBlocks   int `json:"index_blocks"`
	IndexCapacity int `json:"index_capacity"`
}

func routingOf(u upstream.UpstreamStat) routingJSON {
	r := routingJSON{Routed: map[string]uint64{}, PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens,
		IndexBlocks: u.IndexBlocks, IndexCapacity: u.IndexCapacity}
	for _, d := range []string{upstream.DecisionPrefix, upstream.DecisionMiss, upstream.DecisionLoad} {
		r.Routed[d] = u.Routed[d]
	}
	if u.PromptTokens > 0 {
		r.HitRatio = round3(float64(u.CachedTokens) / float64(u.PromptTokens))
	}
	return r
}

// getUpstreams serves GET /admin/upstreams: each upstream's limit, where
// it comes from, and its last vLLM load reading.
func (a *api) getUpstreams(w http.ResponseWriter, _ *http.Request) {
	out := upstreamsJSON{Object: "list", Data: []upstreamJSON{}}
	if a.cfg.Upstreams != nil {
		for _, u := range a.cfg.Upstreams() {
			uj := upstreamJSON{URL: u.URL, Healthy: u.Healthy, InFlight: u.InFlight, Reserved: u.Reserved, Limit: u.Limit, Room: u.Room,
				MaxConcurrency: u.MaxConcurrency, Running: u.Running, Waiting: u.Waiting, KVCache: round3(u.KVCache),
				StepMS: round3(u.StepSeconds * 1000), StepGrowth: round3(u.StepGrowth), Errors: u.Errors, Models: u.Models, Routing: routingOf(u)}
			if !u.DownUntil.IsZero() {
				uj.DownUntil = &u.DownUntil
			}
			if uj.Models == nil {
				uj.Models = []string{}
			}
			out.Data = append(out.Data, uj)
		}
	}
	writeJSON(w, out)
}
