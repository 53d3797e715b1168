package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/pacegate/pacegate/gateway/app"
	"github.com/pacegate/pacegate/policy/config"
)

// pacegate is a running gateway in this process.
type pacegate struct {
	*app.App
	cancel context.CancelFunc
}

// gwConfig is the part of a pacegate config the scenarios vary.
type gwConfig struct {
	Upstream       string
	MaxConcurrency int    // 0: not written (the limit is learned from the upstream's metrics)
	Fixed          bool   // fixed_concurrency: max_concurrency is the limit, metrics are not read
	Backend        string // "embedded" (default) or "rocketmq"
	Workers        int
	Defaults       string // the defaults: mapping, e.g. "{rate: .inf, backlog: 10000, max_wait: 30s}"
	Tenants        int    // tenants t0..t(n-1), keys sk-t<i>
	ExtraTenants   string // raw YAML tenant list items appended after them
	Extra          string // raw top-level YAML appended at the end (e.g. a fairness: block)
}

// yaml renders the config file.
func (c gwConfig) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: \"127.0.0.1:0\"\nmodels: [%s]\n", simModel)
	fmt.Fprintf(&b, "upstreams: [{url: %q, ", c.Upstream)
	if c.MaxConcurrency > 0 {
		fmt.Fprintf(&b, "max_concurrency: %d, ", c.MaxConcurrency)
	}
	if c.Fixed {
		b.WriteString("fixed_concurrency: true, ")
	}
	fmt.Fprintf(&b, "models: [%s]}]\n", simModel)
	b.WriteString("server: {request_timeout: 120s, heartbeat: 5s, max_body_bytes: 8388608}\n")
	if c.Backend == "rocketmq" {
		// The topic and group scripts/rocketmq/rmq.sh init created; a
		// replica id of its own per run keeps earlier runs' LiteTopics out.
		fmt.Fprintf(&b, "queue: {backend: rocketmq, rocketmq: {endpoint: %q, topic: %q, group: %q}}\ncluster: {replica_id: bench%d}\n",
			rocketmqEndpoint(), envOr("PACEGATE_ROCKETMQ_TOPIC", "LLM_REQ"), envOr("PACEGATE_ROCKETMQ_GROUP", "GID_PACEGATE"),
			time.Now().UnixNano()%1e6)
	} else {
		fmt.Fprintf(&b, "queue: {backend: embedded, embedded: {workers: %d, max_messages: 1000000}}\n", c.Workers)
	}
	fmt.Fprintf(&b, "defaults: %s\ntenants:\n", c.Defaults)
	for i := range c.Tenants {
		fmt.Fprintf(&b, "  - {id: t%d, keys: [\"sk-t%d\"]}\n", i, i)
	}
	b.WriteString(c.ExtraTenants)
	b.WriteString(c.Extra)
	return b.String()
}

// startPacegate parses and starts a gateway from c.
func startPacegate(ctx context.Context, c gwConfig) (*pacegate, error) {
	cfg, err := config.Parse([]byte(c.yaml()))
	if err != nil {
		return nil, fmt.Errorf("config: %w\n%s", err, c.yaml())
	}
	a, err := app.New(cfg, app.Options{Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	// The label tags every goroutine the gateway starts (listener,
	// connections, engine workers, upstream calls) in -cpuprofile output:
	// go tool pprof -tagfocus proc=pacegate.
	pprof.Do(runCtx, pprof.Labels("proc", "pacegate"), func(context.Context) { err = a.Start(runCtx) })
	if err != nil {
		cancel()
		return nil, err
	}
	g := &pacegate{App: a, cancel: cancel}
	return g, g.waitReady(ctx)
}

// waitReady waits until the pool has discovered the upstream (a models
// request answers 200).
func (g *pacegate) waitReady(ctx context.Context) error {
	c := newClient(1)
	ok := waitFor(ctx, 10*time.Second, func() bool {
		tr := doStream(ctx, c, g.URL()+"/v1/chat/completions", "sk-t0", "", chatBody(simModel, 1, false))
		return tr.Status == 200
	})
	if !ok {
		return fmt.Errorf("pacegate at %s did not become ready", g.URL())
	}
	return nil
}

// stop shuts the gateway down.
func (g *pacegate) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = g.Shutdown(ctx, 0, 2*time.Second)
	g.cancel()
}

// chatURL is the chat completions endpoint under base.
func chatURL(base string) string { return base + "/v1/chat/completions" }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
