// Package config reads pacegate's YAML configuration file.
//
// [Parse] and [Load] decode strictly (an unknown field is an error, so a
// typo cannot silently fall back to a default), fill in the defaults
// documented on each field, and run [File.Validate]. Environment overrides
// are applied with [File.ApplyEnv], or in one step with [LoadEnv].
//
// The package describes the file and builds package policy's values from
// it ([File.Quotas]); policy itself knows nothing of the file.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pacegate/pacegate/policy"
	"go.yaml.in/yaml/v3"
)

// File is the whole configuration file. Its zero value is not valid: call
// [File.SetDefaults] and [File.Validate] (which [Parse] does). A File is
// plain data and not safe for concurrent mutation.
type File struct {
	Listen    string       `yaml:"listen"`    // OpenAI-compatible API address; default "127.0.0.1:8080"
	Admin     Admin        `yaml:"admin"`     // admin API
	Server    Server       `yaml:"server"`    // HTTP server limits and timeouts
	Upstreams []Upstream   `yaml:"upstreams"` // the model pool; at least one
	Models    []string     `yaml:"models"`    // optional served model list; empty = what the upstreams report
	Queue     Queue        `yaml:"queue"`     // where paced requests wait
	Cluster   Cluster      `yaml:"cluster"`   // the replicas sharing the quotas, and their store
	Control   Control      `yaml:"control"`   // closed loop on vLLM metrics
	Defaults  LimitsSpec   `yaml:"defaults"`  // limits for every tenant+model unless overridden
	Orgs      []Org        `yaml:"orgs"`      // org-wide caps binding several tenants
	Tenants   []TenantSpec `yaml:"tenants"`   // who may call, and at what pace
	Fairness  FairnessSpec `yaml:"fairness"`  // how capacity is shared between waiting tenants
	Routing   Routing      `yaml:"routing"`   // which upstream a released request goes to

	// modelOrder[i] lists tenants[i].models keys in file order, so that
	// validation errors come out in the order a reader sees them (a Go
	// map forgets it). Nil for a File built in code.
	modelOrder [][]string
}

// Admin configures the admin API. Its zero value (after defaults) is an
// admin API that is switched off.
type Admin struct {
	Listen string `yaml:"listen"` // default "127.0.0.1:9090"
	Token  string `yaml:"token"`  // bearer token; empty = admin API off
	// AuthBurst is how many wrong admin tokens one source address may
	// send before it is slowed down; default 5.
	AuthBurst int `yaml:"auth_burst"`
	// AuthRefill is how often a slowed-down source earns one more try:
	// until then every request from it gets 429 with Retry-After, the
	// token unchecked. Default 10s.
	AuthRefill time.Duration `yaml:"auth_refill"`
	// AuthMaxSources bounds the source addresses remembered; past it, new
	// sources share one budget. Default 10000.
	AuthMaxSources int `yaml:"auth_max_sources"`
}

// Server holds the HTTP server's limits. A zero field takes its default,
// except ShutdownDelay: it is a pointer because an explicit 0 (no delay)
// differs from unset.
type Server struct {
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`      // default 8 MiB
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"` // default 10s
	MaxHeaderBytes    int           `yaml:"max_header_bytes"`    // default 64 KiB
	RequestTimeout    time.Duration `yaml:"request_timeout"`     // default 120s; must exceed every max_wait
	Heartbeat         time.Duration `yaml:"heartbeat"`           // SSE ": queued" comment interval; default 5s
	// ShutdownDelay is how long /readyz fails before the listener closes
	// on SIGTERM, while requests are still served: a load balancer takes
	// a while to stop routing here (Kubernetes removes endpoints
	// asynchronously). Default 5s; 0 closes the listener at once.
	ShutdownDelay *time.Duration `yaml:"shutdown_delay"`
	ShutdownGrace time.Duration  `yaml:"shutdown_grace"` // then in-flight requests get this long; default 30s
	// WriteStallTimeout cuts a stream whose client stops reading while
	// keeping its connection: a write or flush that cannot complete within
	// it fails, and the upstream call is aborted. Default 30s; 0 = no
	// limit (a pointer, because an explicit 0 differs from unset).
	WriteStallTimeout *time.Duration `yaml:"write_stall_timeout"`
	// MaxConnections bounds the client connections open at once; more wait
	// in the kernel's accept queue. Default 10000.
	MaxConnections int `yaml:"max_connections"`
	// IdleTimeout closes a keep-alive connection idle between requests
	// this long. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// StoredResponses bounds the stored-response ids remembered, with the
	// tenant that made each and the upstream that holds it, so that a
	// follow-up reaches that upstream and only for that tenant; the least
	// recently used go first. Default 65536.
	StoredResponses int `yaml:"stored_responses"`
	// StoredResponseTTL forgets an id unused this long. Default 1h.
	StoredResponseTTL time.Duration `yaml:"stored_response_ttl"`
	// ReadBodyTimeout bounds the time from the end of the headers to the
	// last byte of the body: a body trickled slower gets 408 and its
	// connection is closed. Default 30s.
	ReadBodyTimeout time.Duration `yaml:"read_body_timeout"`
}

// Upstream is one OpenAI-compatible model server (typically vLLM).
type Upstream struct {
	URL string `yaml:"url"` // required, http or https
	// MaxConcurrency caps the requests in flight to it. Unset (0), there
	// is no cap: the limit is learned from the server's vLLM /metrics
	// (the concurrency at which it starts to queue), and is 64 while
	// those cannot be read. Set, it caps the learned limit and is the
	// limit while the metrics cannot be read.
	MaxConcurrency int `yaml:"max_concurrency"`
	// FixedConcurrency: the limit is max_concurrency (64 if unset) and the
	// server's metrics are not read; for servers that are not vLLM.
	FixedConcurrency bool     `yaml:"fixed_concurrency"`
	Models           []string `yaml:"models"` // empty = discover via GET /v1/models
	// IdleTimeout ends a stream whose upstream sends nothing this long
	// (the wait for the first token included) with an upstream_error and
	// frees its slot. Default 30s; 0 = no
	// limit (a pointer, because an explicit 0 differs from unset).
	IdleTimeout *time.Duration `yaml:"idle_timeout"`
	// CacheTokens is the size of its KV (prefix) cache in tokens, which
	// bounds what prefix routing remembers of it; 0 (the default) =
	// learned from the cached token counts it reports.
	CacheTokens int64 `yaml:"cache_tokens"`
}

// Routing chooses the upstream a released request goes to. A zero field
// takes its default.
type Routing struct {
	// Policy is "prefix" (the default: the upstream whose KV cache most
	// probably holds the prompt's prefix, within the load bound) or
	// "least_outstanding".
	Policy string `yaml:"policy"`
	// LoadBound: an upstream whose requests in flight would exceed
	// LoadBound × the mean over the model's upstreams, plus one, is
	// skipped for the next best. Default 1.25; must be >= 1.
	LoadBound float64 `yaml:"load_bound"`
	// MaxPrefixBytes is how much of a rendered prompt is hashed for
	// routing (bounded work and memory for huge prompts). Default 65536.
	MaxPrefixBytes int `yaml:"max_prefix_bytes"`
}

// Routing policies.
const (
	RoutingPrefix           = "prefix"
	RoutingLeastOutstanding = "least_outstanding"
)

// Queue selects the queue backend. A zero field takes its default.
type Queue struct {
	Backend  string   `yaml:"backend"` // BackendEmbedded (default) or BackendRocketMQ
	Embedded Embedded `yaml:"embedded"`
	RocketMQ RocketMQ `yaml:"rocketmq"`
}

// Queue backends.
const (
	BackendEmbedded = "embedded"
	BackendRocketMQ = "rocketmq"
)

// Embedded configures the in-process queue.
type Embedded struct {
	Workers     int           `yaml:"workers"`      // default 64
	MaxMessages int           `yaml:"max_messages"` // across all buckets; default 100000
	MaxBytes    int64         `yaml:"max_bytes"`    // across all buckets; default 256 MiB
	IdleTTL     time.Duration `yaml:"idle_ttl"`     // an empty bucket's queue is dropped after this; default 10m
}

// RocketMQ configures the RocketMQ LiteTopic backend.
type RocketMQ struct {
	Endpoint string `yaml:"endpoint"` // proxy gRPC endpoint; default "127.0.0.1:8081"
	Topic    string `yaml:"topic"`    // parent topic; default "LLM_REQ"
	Group    string `yaml:"group"`    // consumer group; default "GID_PACEGATE"
	// Deprecated: ReplicaID and Replicas moved to [Cluster]; a file that
	// still sets them here is read as if it set cluster's (see
	// [File.Deprecations]).
	ReplicaID string        `yaml:"replica_id"`
	Replicas  int           `yaml:"replicas"`
	Invisible time.Duration `yaml:"invisible"` // message invisible duration; default 10s (the proxy's minimum)
	// The LiteTopic subscriptions (see consume/rocketmq.Config; a zero
	// field takes that package's default).
	MaxLiteTopics       int           `yaml:"max_lite_topics"`       // subscribed at once; set to the group's lite.sub.client.quota; 0 = no local cap
	IdleUnsubscribe     time.Duration `yaml:"idle_unsubscribe"`      // a LiteTopic unused this long is unsubscribed; default 5m
	SubscribeWait       time.Duration `yaml:"subscribe_wait"`        // a publish waits this long for a new LiteTopic's subscription; default 1s
	StallAfter          time.Duration `yaml:"stall_after"`           // a message overdue this long (plus twice the delivery lag) gets its LiteTopic re-subscribed; default 2s
	LiteTopicExpiration time.Duration `yaml:"lite_topic_expiration"` // the parent topic's lite.topic.expiration; default 24h
}

// Control configures the closed loop that scales pacing rates from vLLM
// metrics. A zero numeric field takes its default; Enabled defaults to
// false.
type Control struct {
	Enabled       bool          `yaml:"enabled"`
	Interval      time.Duration `yaml:"interval"`       // default 2s
	WaitingTarget float64       `yaml:"waiting_target"` // vLLM waiting requests per upstream; default 8
	MinFactor     float64       `yaml:"min_factor"`     // default 0.1
	MaxFactor     float64       `yaml:"max_factor"`     // default 1
	Decrease      float64       `yaml:"decrease"`       // multiplicative decrease; default 0.5
	Increase      float64       `yaml:"increase"`       // additive increase; default 0.05
}

// LimitsSpec is a partial set of limits: a nil field is "not set here"
// and inherits (model > tenant > defaults > built-in), which is why the
// fields are pointers: an explicit 0 differs from unset. It is the file's
// spelling of a [policy.Override], field for field (the conversion in
// override keeps the two in step): policy checks and applies it.
type LimitsSpec struct {
	RPM     *int64         `yaml:"rpm"`      // requests per minute; 0 = no cap
	TPM     *int64         `yaml:"tpm"`      // tokens per minute; 0 = no cap
	Burst   *int64         `yaml:"burst"`    // burst bucket capacity; 0 = no burst check
	Rate    *float64       `yaml:"rate"`     // requests/s released to the pool; .inf = unpaced
	Backlog *int           `yaml:"backlog"`  // max queued requests per bucket
	MaxWait *time.Duration `yaml:"max_wait"` // longest a request may wait in its bucket
}

// Org is a group of tenants sharing org-wide caps.
type Org struct {
	ID  string `yaml:"id"`
	RPM int64  `yaml:"rpm"` // 0 = no cap
	TPM int64  `yaml:"tpm"` // 0 = no cap
}

// TenantSpec is one tenant: who it is, how it authenticates, and its limits.
type TenantSpec struct {
	ID       string                `yaml:"id"`
	Org      string                `yaml:"org"`      // optional; must be listed in orgs when orgs is non-empty
	Keys     []string              `yaml:"keys"`     // API keys, plain or "sha256:<64 hex>"
	Priority string                `yaml:"priority"` // PriorityHigh, PriorityNormal (default) or PriorityLow
	Weight   float64               `yaml:"weight"`   // share of capacity within its priority band; default 1, must be > 0
	Limits   LimitsSpec            `yaml:"limits"`
	Models   map[string]LimitsSpec `yaml:"models"` // per-model overrides of Limits
}

// Tenant priorities.
const (
	PriorityHigh   = "high"
	PriorityNormal = "normal"
	PriorityLow    = "low"
)

// FairnessSpec configures how the pool's capacity is shared between the
// tenants waiting for it. A zero field takes its default.
type FairnessSpec struct {
	Mode string `yaml:"mode"` // "fair" (default) or "poll": the old 25 ms capacity poll, kept to measure against
	// CompletionWeight is w in service = prompt tokens + w × completion
	// tokens; default 2, must be > 0.
	CompletionWeight float64 `yaml:"completion_weight"`
	// Reserve is how many free slots of a model are kept for tenants of
	// the high band and tenants below their weighted share of the model's
	// slots, even before they are active (the room owed to active ones is
	// kept anyway); default 0. See the README's "Fair share of a
	// saturated pool".
	Reserve int `yaml:"reserve"`
	// Headroom is how many requests of a model may run beyond its
	// upstreams' limits, only for tenants of the high band and tenants
	// below their weighted share: for fixed_concurrency upstreams whose
	// servers have room beyond max_concurrency. Default 0. See the
	// README's "Fair share of a saturated pool".
	Headroom int       `yaml:"headroom"`
	Bands    BandsSpec `yaml:"bands"`
}

// Fairness modes.
const (
	FairnessFair = "fair"
	FairnessPoll = "poll"
)

// DefaultCompletionWeight is fairness.completion_weight when unset.
const DefaultCompletionWeight = 2.0

// BandsSpec holds one BandSpec per priority band. The zero value bounds
// no band.
type BandsSpec struct {
	High   BandSpec `yaml:"high"`
	Normal BandSpec `yaml:"normal"`
	Low    BandSpec `yaml:"low"`
}

// BandSpec configures one priority band. The zero value bounds nothing
// (the high band's MaxSlowdown then takes its default).
type BandSpec struct {
	// MaxWait is how long a request of the band may wait to be released
	// to the pool before it gets 429 queue_full; 0 = unbounded.
	MaxWait time.Duration `yaml:"max_wait"`
	// MaxSlowdown is how much longer the steps of the band's requests
	// may take, through requests of lower bands running beside them,
	// than with the band's own requests alone: while the band is active
	// on a model, lower bands start requests only while each server's
	// batch stays within it, as learned from vLLM's inter-token latency.
	// >= 1; .inf bounds nothing. Default DefaultHighMaxSlowdown for high,
	// .inf otherwise.
	MaxSlowdown float64 `yaml:"max_slowdown"`
}

// DefaultHighMaxSlowdown is fairness.bands.high.max_slowdown when unset.
const DefaultHighMaxSlowdown = 1.25

// MaxSlowdowns returns each band's max_slowdown, high to low (0: unset,
// which bounds nothing; Validate and the defaults have run).
func (b BandsSpec) MaxSlowdowns() [3]float64 {
	return [3]float64{b.High.MaxSlowdown, b.Normal.MaxSlowdown, b.Low.MaxSlowdown}
}

// MaxWait returns the max_wait of p's band (0 = unbounded). An unknown
// Priority gets the normal band's, as [policy.Priority.Band] ranks it.
func (b BandsSpec) MaxWait(p policy.Priority) time.Duration {
	switch p {
	case policy.PriorityHigh:
		return b.High.MaxWait
	case policy.PriorityLow:
		return b.Low.MaxWait
	}
	return b.Normal.MaxWait
}

// Parse decodes a configuration file strictly, fills defaults and
// validates it. A decoding error is returned wrapped as "config: ...";
// validation errors are returned as [File.Validate] produces them.
func Parse(data []byte) (*File, error) {
	f, err := decode(data)
	if err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// Load reads and parses the file at path.
func Load(path string) (*File, error) {
	return LoadEnv(path, nil)
}

// LoadEnv reads the file at path, applies the environment through lookup
// (nil = none; pass [os.LookupEnv] for the process environment), then
// validates. Unlike Load followed by ApplyEnv, it accepts a file whose
// upstreams come only from PACEGATE_UPSTREAMS.
func LoadEnv(path string, lookup func(string) (string, bool)) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if lookup != nil {
		f.applyEnv(lookup)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// decode is Parse without validation.
func decode(data []byte) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	f := new(File)
	if err := dec.Decode(f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config: empty file")
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	var rest yaml.Node
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return nil, errors.New("config: more than one YAML document")
	}
	f.modelOrder = modelOrder(data)
	f.SetDefaults()
	return f, nil
}

// modelOrder returns, for each entry of tenants, the keys of its models
// mapping in file order. The data has already decoded cleanly.
func modelOrder(data []byte) [][]string {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	tenants := mappingValue(root.Content[0], "tenants")
	if tenants == nil || tenants.Kind != yaml.SequenceNode {
		return nil
	}
	order := make([][]string, len(tenants.Content))
	for i, t := range tenants.Content {
		models := mappingValue(t, "models")
		if models == nil || models.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(models.Content); j += 2 {
			order[i] = append(order[i], models.Content[j].Value)
		}
	}
	return order
}

// mappingValue returns the value node of key in mapping n, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
