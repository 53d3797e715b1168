package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacegate/pacegate/consume/upstream"
)

// Prefix routing, per upstream (see the README's "KV-cache-aware
// routing"). The hit ratio over a window is
// rate(cached_tokens_total) / rate(prompt_tokens_total).
var (
	descRouted       = desc("pacegate_upstream_routed_total", "Requests routed to an upstream, by decision: prefix (it held the longest prefix that could be served), miss (nobody held any: least loaded), load (a holder of more was full or over the load bound).", "upstream", "decision")
	descPromptTokens = desc("pacegate_upstream_prompt_tokens_total", "Prompt tokens of the responses an upstream served that reported their prefix-cache hits.", "upstream")
	descCachedTokens = desc("pacegate_upstream_cached_tokens_total", "Prompt tokens an upstream reported as prefix-cache hits (usage cached_tokens).", "upstream")
	descHitRatio     = desc("pacegate_upstream_prefix_cache_hit_ratio", "Cached over prompt tokens an upstream reported since the start (0 before any report).", "upstream")
	descIndexBlocks  = desc("pacegate_upstream_prefix_index_blocks", "Prompt blocks (256 bytes) the prefix index remembers for an upstream.", "upstream")
	descIndexCap     = desc("pacegate_upstream_prefix_index_capacity_blocks", "Most prompt blocks the prefix index keeps for an upstream: its cache size, configured or learned.", "upstream")
)

var routingDescs = []*prometheus.Desc{descRouted, descPromptTokens, descCachedTokens, descHitRatio, descIndexBlocks, descIndexCap}

var decisions = []string{upstream.DecisionPrefix, upstream.DecisionMiss, upstream.DecisionLoad}

func (c *stateCollector) collectRouting(ch chan<- prometheus.Metric) {
	for _, u := range c.cfg.Upstreams.Stats() {
		for _, d := range decisions {
			ch <- prometheus.MustNewConstMetric(descRouted, prometheus.CounterValue, float64(u.Routed[d]), u.URL, d)
		}
		ratio := 0.0
		if u.PromptTokens > 0 {
			ratio = float64(u.CachedTokens) / float64(u.PromptTokens)
		}
		ch <- prometheus.MustNewConstMetric(descPromptTokens, prometheus.CounterValue, float64(u.PromptTokens), u.URL)
		ch <- prometheus.MustNewConstMetric(descCachedTokens, prometheus.CounterValue, float64(u.CachedTokens), u.URL)
		ch <- prometheus.MustNewConstMetric(descHitRatio, prometheus.GaugeValue, ratio, u.URL)
		ch <- prometheus.MustNewConstMetric(descIndexBlocks, prometheus.GaugeValue, float64(u.IndexBlocks), u.URL)
		ch <- prometheus.MustNewConstMetric(descIndexCap, prometheus.GaugeValue, float64(u.IndexCapacity), u.URL)
	}
}
