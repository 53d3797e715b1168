package vllmmetrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxBody bounds what is read from one /metrics response.
const MaxBody = 8 << 20

// Fetch GETs the /metrics of the vLLM server at base (see [URL]) and
// parses it. ctx bounds the whole exchange.
func Fetch(ctx context.Context, c *http.Client, base string) (Reading, error) {
	url := URL(base)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Reading{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return Reading{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // let the connection be reused
		return Reading{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(io.LimitReader(resp.Body, MaxBody))
}

// URL appends /metrics to an upstream's base URL. Upstream URLs may carry
// the OpenAI /v1 prefix; vLLM serves /metrics at the root.
func URL(base string) string {
	base = strings.TrimSuffix(base, "/")
	base = strings.TrimSuffix(base, "/v1")
	return base + "/metrics"
}

// Sum adds up every model's gauges: a server's load whatever it serves.
// KVCache is the highest; the cache is shared by the server's models.
func Sum(byModel map[string]Gauges) Gauges {
	var g Gauges
	for _, m := range byModel {
		g.Waiting += m.Waiting
		g.Running += m.Running
		g.KVCache = max(g.KVCache, m.KVCache)
		g.ITLSeconds += m.ITLSeconds
		g.ITLTokens += m.ITLTokens
	}
	return g
}
