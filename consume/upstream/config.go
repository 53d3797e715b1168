package upstream

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config sets up a [Pool]. Zero fields take the defaults noted.
type Config struct {
	// Upstreams are the vLLM servers; at least one.
	Upstreams []UpstreamConfig
	// Transport makes the upstream calls. If nil, a *http.Transport tuned
	// for many long-lived streams to few hosts is used.
	Transport http.RoundTripper
	// HealthInterval is the period of the active prober. Default 5s.
	HealthInterval time.Duration
	// DownBackoff is how long a failed upstream is left alone; it doubles
	// on each failure up to MaxDownBackoff. Defaults 1s and 30s.
	DownBackoff, MaxDownBackoff time.Duration
	// MetricsInterval is how often each upstream's vLLM /metrics is read
	// to learn its limit (see [UpstreamConfig.MaxConcurrency]); a reading
	// times out after as long. Default DefaultMetricsInterval; negative
	// turns the readings off, and every upstream keeps MaxConcurrency.
	MetricsInterval time.Duration
	// KVThreshold is the KV-cache usage (0 to 1] past which a learned
	// limit stops growing. Default DefaultKVThreshold.
	KVThreshold float64
	// MaxBodyBytes bounds a non-streamed response body. Default 32 MiB.
	MaxBodyBytes int64
	// Logger receives health changes and retries. If nil, slog.Default().
	Logger *slog.Logger
	// Observer is told the result of each upstream attempt. Optional.
	Observer Observer
	// Routing chooses among the upstreams that have room. The zero value
	// routes by prompt prefix with DefaultLoadBound.
	Routing Routing
}

// Routing chooses the upstream of a queued request among those that have
// room for it.
type Routing struct {
	// Policy is RoutePrefix (used when empty) or RouteLeastOutstanding.
	// Prefix routing applies to requests that carry a prompt prefix
	// (consume.Request.Prefix: the generation routes); the others, direct
	// calls and retries go to the least loaded upstream either way.
	Policy string
	// LoadBound keeps prefix routing from piling onto one upstream: one
	// whose requests in flight would exceed LoadBound × the mean of the
	// model's upstreams, plus one, is skipped for the next best; the only
	// upstream holding the longest prefix, under its learned limit, is
	// bounded by its recent load (its requests in flight averaged over
	// about a second) instead. Zero means DefaultLoadBound; below 1 is an
	// error.
	LoadBound float64
}

// UpstreamConfig is one vLLM server.
type UpstreamConfig struct {
	// URL is the server root, e.g. http://10.0.0.7:8000 (paths such as
	// /v1/chat/completions are appended).
	URL string
	// MaxConcurrency bounds the requests in flight to it. By default the
	// bound is learned from the server's own /metrics: the concurrency at
	// which vLLM starts to queue requests (see [Config.MetricsInterval]);
	// MaxConcurrency then only caps it, and is the bound while the
	// metrics cannot be read. 0 means no cap, and DefaultMaxConcurrency
	// while the metrics cannot be read.
	MaxConcurrency int
	// FixedConcurrency turns the learning off for this upstream: its
	// bound is MaxConcurrency (or DefaultMaxConcurrency) and its metrics
	// are not read. For servers that are not vLLM.
	FixedConcurrency bool
	// Headroom is how many requests it may run beyond MaxConcurrency
	// when the caller asks for headroom (TryAcquireHeadroom): room the
	// server has that only the fair-share gate hands out, to buckets
	// below their share. Default 0; negative is an error.
	Headroom int
	// Models it serves. Empty: discovered from GET /v1/models at Start
	// and refreshed by the prober.
	Models []string
	// IdleTimeout ends a streamed response whose upstream sends no event
	// for this long (ErrStreamStalled) and aborts the call, freeing the
	// slot. Only time spent waiting on the upstream counts, not time the
	// client takes to read; the wait for the first event after the
	// headers counts too (vLLM sends its headers at once), so it must
	// exceed the slowest time to first token. 0 means no limit; negative
	// is an error.
	IdleTimeout time.Duration
	// CacheTokens is the size of its prefix (KV) cache in tokens, which
	// bounds what the prefix index remembers of it. Zero means learned:
	// it starts at prefix.DefaultCacheTokens and follows the cached token
	// counts the upstream reports.
	CacheTokens int64
}

// Observer is an optional metrics hook. Result is called once per
// attempt: status is 0 when no response arrived; err is what ended the
// attempt (nil for a clean response). It must be safe for concurrent use
// and must not block.
type Observer interface {
	Result(upstream string, status int, err error)
}

// UpstreamStat is a snapshot of one upstream, returned by Pool.Stats.
type UpstreamStat struct {
	URL      string
	InFlight int
	// Reserved is how many of InFlight are slots taken and not yet used
	// by a call: mostly granted to a waiting bucket whose delivery has
	// not come yet.
	Reserved       int
	MaxConcurrency int // the configured cap, or DefaultMaxConcurrency
	// Limit is how many requests it may run now; Room says where that
	// comes from: RoomMetrics (learned), RoomFallback (learning, but the
	// metrics cannot be read: MaxConcurrency), RoomFixed.
	Limit int
	Room  string
	// Running, Waiting and KVCache are the server's last good reading.
	Running, Waiting, KVCache float64
	// StepSeconds is the time between two tokens of a stream in a batch
	// of one, and StepGrowth what each further request in the batch adds
	// to it, as a fraction of it: the line fitted to the server's
	// inter-token latency by batch. Both 0 until it is fitted.
	StepSeconds, StepGrowth float64
	Headroom                int
	Healthy                 bool
	Errors                  uint64    // failures counted against it (transport errors, 5xx, failed probes)
	DownUntil               time.Time // zero while healthy
	Models                  []string
	// Routed counts the routing decisions that sent requests here, by
	// decision (DecisionPrefix, DecisionMiss, DecisionLoad).
	Routed map[string]uint64
	// PromptTokens and CachedTokens add up the prompt tokens of the
	// responses it served and the part it reported as prefix-cache hits
	// (responses that report none count in neither).
	PromptTokens, CachedTokens int64
	// IndexBlocks and IndexCapacity are the prompt blocks the prefix
	// index remembers for it and the most it may (0 without prefix
	// routing).
	IndexBlocks, IndexCapacity int
}

// Values of UpstreamStat.Room.
const (
	RoomMetrics  = "metrics"
	RoomFallback = "fallback"
	RoomFixed    = "fixed"
)

func (c Config) withDefaults() (Config, error) {
	if len(c.Upstreams) == 0 {
		return c, fmt.Errorf("upstream: no upstreams configured")
	}
	setDefault(&c.HealthInterval, 5*time.Second)
	setDefault(&c.DownBackoff, time.Second)
	setDefault(&c.MaxDownBackoff, 30*time.Second)
	if c.MetricsInterval == 0 {
		c.MetricsInterval = DefaultMetricsInterval
	}
	if !(c.KVThreshold > 0 && c.KVThreshold <= 1) {
		c.KVThreshold = DefaultKVThreshold
	}
	c.MaxDownBackoff = max(c.MaxDownBackoff, c.DownBackoff)
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch c.Routing.Policy {
	case "":
		c.Routing.Policy = RoutePrefix
	case RoutePrefix, RouteLeastOutstanding:
	default:
		return c, fmt.Errorf("upstream: unknown routing policy %q", c.Routing.Policy)
	}
	if c.Routing.LoadBound == 0 {
		c.Routing.LoadBound = DefaultLoadBound
	}
	if c.Routing.LoadBound < 1 {
		return c, fmt.Errorf("upstream: routing load bound %v is below 1", c.Routing.LoadBound)
	}
	seen := map[string]bool{}
	ups := make([]UpstreamConfig, len(c.Upstreams))
	for i, u := range c.Upstreams {
		base, err := normalizeURL(u.URL)
		if err != nil {
			return c, err
		}
		if seen[base] {
			return c, fmt.Errorf("upstream: %s listed twice", base)
		}
		seen[base] = true
		if u.MaxConcurrency < 0 {
			return c, fmt.Errorf("upstream: %s: negative MaxConcurrency", base)
		}
		if u.Headroom < 0 {
			return c, fmt.Errorf("upstream: %s: negative Headroom", base)
		}
		if u.CacheTokens < 0 {
			return c, fmt.Errorf("upstream: %s: negative CacheTokens", base)
		}
		if u.IdleTimeout < 0 {
			return c, fmt.Errorf("upstream: %s: negative IdleTimeout", base)
		}
		u.URL, u.Models = base, append([]string(nil), u.Models...)
		ups[i] = u
	}
	c.Upstreams = ups
	return c, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

func normalizeURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("upstream: bad URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("upstream: bad URL %q: want http(s)://host[:port][/path]", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}
