package control

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
)

// scraper fetches and aggregates the upstreams' gauges. It remembers
// which upstreams are failing so that a down upstream is logged once per
// outage, not once per scrape. Safe for concurrent use.
type scraper struct {
	client *http.Client
	logger *slog.Logger

	mu      sync.Mutex
	failing map[string]bool
}

func newScraper(c *http.Client, l *slog.Logger) *scraper {
	return &scraper{client: c, logger: l, failing: map[string]bool{}}
}

// all scrapes the upstreams concurrently (there are few: one goroutine
// each, all waited for) and aggregates per model.
func (s *scraper) all(ctx context.Context, urls []string) map[string]Sample {
	results := make([]map[string]vllmmetrics.Gauges, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { results[i] = s.one(ctx, u) })
	}
	wg.Wait()
	return aggregate(results)
}

// aggregate turns per-upstream gauges into per-model samples: waiting is
// the mean over the upstreams reporting the model (the target is per
// upstream), running the sum, KV-cache usage the maximum.
func aggregate(results []map[string]vllmmetrics.Gauges) map[string]Sample {
	out := map[string]Sample{}
	for _, r := range results {
		for model, g := range r {
			s := out[model]
			s.Waiting += g.Waiting
			s.Running += g.Running
			s.KVCache = max(s.KVCache, g.KVCache)
			s.Upstreams++
			out[model] = s
		}
	}
	for model, s := range out {
		s.Waiting /= float64(s.Upstreams)
		out[model] = s
	}
	return out
}

// one scrapes one upstream; nil when it failed.
func (s *scraper) one(ctx context.Context, base string) map[string]vllmmetrics.Gauges {
	g, err := vllmmetrics.Fetch(ctx, s.client, base)
	s.mu.Lock()
	was := s.failing[base]
	s.failing[base] = err != nil
	s.mu.Unlock()
	switch {
	case err != nil && !was && ctx.Err() == nil:
		s.logger.Warn("control: scrape failed; holding its models until it answers", "upstream", base, "err", err)
	case err == nil && was:
		s.logger.Info("control: scrape recovered", "upstream", base)
	}
	return g.Models
}
