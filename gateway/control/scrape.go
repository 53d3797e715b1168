package control

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
)

// maxMetricsBody bounds what is read from one /metrics response.
const maxMetricsBody = 8 << 20

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
	results := make([]map[string]Gauges, len(urls))
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
func aggregate(results []map[string]Gauges) map[string]Sample {
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
func (s *scraper) one(ctx context.Context, base string) map[string]Gauges {
	g, err := s.fetch(ctx, metricsURL(base))
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
	return g
}

func (s *scraper) fetch(ctx context.Context, url string) (map[string]Gauges, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // let the connection be reused
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseGauges(io.LimitReader(resp.Body, maxMetricsBody))
}

// metricsURL appends /metrics to an upstream's base URL. Upstream URLs
// may carry the OpenAI /v1 prefix; vLLM serves /metrics at the root.
func metricsURL(base string) string {
	base = strings.TrimSuffix(base, "/")
	base = strings.TrimSuffix(base, "/v1")
	return base + "/metrics"
}
