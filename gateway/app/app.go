package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/consume/rocketmq"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/gateway"
	"github.com/pacegate/pacegate/gateway/control"
	"github.com/pacegate/pacegate/gateway/metrics"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/cluster"
	"github.com/pacegate/pacegate/policy/config"
)

// App is one pacegate process. Its methods are safe for concurrent use.
type App struct {
	logger *slog.Logger

	mu  sync.Mutex // guards cfg
	cfg *config.File

	Table    *policy.Table
	Pacer    *policy.Pacer
	Admitter gateway.Admitter // *policy.Admitter, or *cluster.Admitter with a cluster store
	// Store is the cluster's shared store (cluster.store); nil without
	// one. Start starts its goroutine, Shutdown stops it.
	Store *cluster.Store
	// countQueued gives the cluster pacer and admitter the queue's
	// backlog once the queue exists; nil without a store.
	countQueued func(func(policy.Key) int)
	Queue       *consume.Queue // the one owner of queued requests, over the backend
	Pool        *upstream.Pool
	Consumer    *consume.Consumer
	Gateway     *gateway.Server
	Metrics     *metrics.Metrics // Prometheus, on the admin listener
	Control     *control.Loop    // the closed loop; nil unless control.enabled

	ops      ops                  // admin listener (ops.go)
	fairness *fairshare.Scheduler // the pool's fair share, read by metrics and the admin API
	server   *http.Server
	ln       net.Listener
	done     chan struct{}                        // closed when the HTTP server has stopped serving
	after    func(time.Duration) <-chan time.Time // a seam for tests; time.After otherwise

	adminFallback string // Options.AdminFallback
}

// Options tune New beyond the config file.
type Options struct {
	Logger *slog.Logger
	// GatewayObserver, ConsumerObserver and UpstreamObserver receive
	// metrics events; nil means the App's own Prometheus Metrics.
	GatewayObserver  gateway.Observer
	ConsumerObserver consume.Observer
	UpstreamObserver upstream.Observer
	// AdminFallback is where the admin API listens when admin.listen is
	// taken. Empty means nowhere: Start fails.
	AdminFallback string
}

// New builds every part of the process from cfg without starting any.
func New(cfg *config.File, opts Options) (*App, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	quotas, err := cfg.Quotas()
	if err != nil {
		return nil, err
	}
	a := &App{logger: logger, cfg: cfg, done: make(chan struct{}), after: time.After, adminFallback: opts.AdminFallback}
	a.Table = policy.NewTable(quotas)
	pacer := a.newLimits(cfg)
	backend, err := newBackend(cfg, logger)
	if err != nil {
		a.closeStore()
		return nil, err
	}
	a.Queue = consume.NewQueue(backend, replicaID(cfg))
	if a.countQueued != nil {
		a.countQueued(a.Queue.Backlog)
	}
	a.newOps(cfg, &opts) // before the pool, which takes its observer at construction
	a.storeMetrics()
	if a.Pool, err = newPool(cfg, logger, opts.UpstreamObserver); err != nil {
		a.closeStore()
		return nil, err
	}
	a.Consumer = consume.NewConsumer(consume.ConsumerConfig{
		Queue: a.Queue, Pacer: pacer, Upstreams: a.Pool, Fairness: a.fairness,
		Capacity: capacityMode(cfg), CompletionWeight: cfg.Fairness.CompletionWeight, Reserve: cfg.Fairness.Reserve,
		Headroom: cfg.Fairness.Headroom, MaxSlowdown: cfg.Fairness.Bands.MaxSlowdowns(),
		Observer: opts.ConsumerObserver, Logger: logger,
	})
	// A rate change reaches requests already queued: suspended buckets
	// it touches are woken and ask the pacer again.
	a.Table.OnChange(a.Queue.WakeSuspended)
	a.Pacer.OnChange(a.Queue.WakeSuspended)
	a.Gateway = gateway.New(gateway.Config{
		Table: a.Table, Admitter: a.Admitter, Pacer: a.Pacer, Queue: a.Queue, Pool: a.Pool,
		BandMaxWait: a.bandMaxWait, Models: cfg.Models, MaxBodyBytes: cfg.Server.MaxBodyBytes,
		RequestTimeout: cfg.Server.RequestTimeout, Heartbeat: cfg.Server.Heartbeat,
		WriteStallTimeout: durationOr0(cfg.Server.WriteStallTimeout),
		AffinitySize:      cfg.Server.StoredResponses, AffinityTTL: cfg.Server.StoredResponseTTL,
		PrefixBytes: prefixBytes(cfg.Routing), Observer: opts.GatewayObserver, Logger: logger,
	})
	a.server = &http.Server{
		Handler:           bodyDeadline(a.Gateway, cfg.Server.ReadBodyTimeout),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return a, nil
}

func newPool(cfg *config.File, logger *slog.Logger, obs upstream.Observer) (*upstream.Pool, error) {
	ups := make([]upstream.UpstreamConfig, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		ups = append(ups, upstream.UpstreamConfig{URL: u.URL, MaxConcurrency: u.MaxConcurrency,
			FixedConcurrency: u.FixedConcurrency, Headroom: cfg.Fairness.Headroom, Models: u.Models,
			IdleTimeout: durationOr0(u.IdleTimeout), CacheTokens: u.CacheTokens})
	}
	return upstream.NewPool(upstream.Config{Upstreams: ups, Logger: logger, Observer: obs,
		Routing: upstream.Routing{Policy: cfg.Routing.Policy, LoadBound: cfg.Routing.LoadBound}})
}

// prefixBytes is how much of a prompt the gateway hashes: nothing unless
// the pool routes by prefix.
func prefixBytes(r config.Routing) int {
	if r.Policy != config.RoutingPrefix {
		return 0
	}
	return r.MaxPrefixBytes
}

// durationOr0 reads an optional duration (nil: 0, which the packages
// read as "no limit"; the config's defaults have filled it by now).
func durationOr0(d *time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return *d
}

func newBackend(cfg *config.File, logger *slog.Logger) (consume.Backend, error) {
	q := cfg.Queue
	switch q.Backend {
	case "rocketmq":
		r := q.RocketMQ
		b, err := rocketmq.New(rocketmq.Config{Endpoint: r.Endpoint, Topic: r.Topic, Group: r.Group,
			ReplicaID: cfg.Cluster.ReplicaID, InvisibleDuration: r.Invisible, MaxLiteTopics: r.MaxLiteTopics,
			IdleUnsubscribe: r.IdleUnsubscribe, SubscribeWait: r.SubscribeWait, StallAfter: r.StallAfter,
			LiteTopicExpiration: r.LiteTopicExpiration, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("queue.rocketmq: %w", err)
		}
		return b, nil
	default:
		e := q.Embedded
		// InlineDelivery: the consumer's Handle returns within
		// microseconds (a wait is a Suspend, not a sleep).
		return embedded.New(embedded.Config{Workers: e.Workers, MaxMessages: e.MaxMessages,
			MaxBytes: e.MaxBytes, IdleTTL: e.IdleTTL, Logger: logger, InlineDelivery: true}), nil
	}
}

func capacityMode(cfg *config.File) consume.CapacityMode {
	if cfg.Fairness.Mode == "poll" {
		return consume.CapacityPoll
	}
	return consume.CapacityFair
}

// bandMaxWait reads the live config, so that a reload changes it.
func (a *App) bandMaxWait(p policy.Priority) time.Duration {
	return a.config().Fairness.Bands.MaxWait(p)
}

// replicaID names this replica's LiteTopics on RocketMQ; the embedded
// engine's names need none (its queues live in this process).
func replicaID(cfg *config.File) string {
	if cfg.Queue.Backend == "rocketmq" {
		return cfg.Cluster.ReplicaID
	}
	return ""
}

// Start listens on the configured address and starts the pool prober, the
// consumer and the HTTP server. It returns once the gateway accepts
// connections.
func (a *App) Start(ctx context.Context) error {
	if a.Store != nil {
		a.Store.Start(ctx)
	}
	if err := a.Pool.Start(ctx); err != nil {
		a.closeStore()
		return fmt.Errorf("upstreams: %w", err)
	}
	if err := a.Queue.Backend().Start(a.Consumer.Handle); err != nil {
		a.Pool.Close()
		a.closeStore()
		return fmt.Errorf("queue: %w", err)
	}
	ln, err := net.Listen("tcp", a.config().Listen)
	if err != nil {
		a.stopQueue(context.Background())
		a.Pool.Close()
		a.closeStore()
		return err
	}
	if n := a.config().Server.MaxConnections; n > 0 {
		ln = limitConns(ln, n, a.server) // before Serve, which reads its hook
	}
	a.ln = ln
	go func() {
		defer close(a.done)
		if err := a.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logger.Error("http server stopped", "err", err)
		}
	}()
	a.logger.Info("pacegate listening", "addr", ln.Addr().String(), "queue", a.config().Queue.Backend)
	if err := a.startOps(ctx); err != nil {
		_ = a.Shutdown(context.WithoutCancel(ctx), 0, 0)
		return fmt.Errorf("admin: %w", err)
	}
	return nil
}

// Addr is the address the gateway listens on (after Start).
func (a *App) Addr() string { return a.ln.Addr().String() }

// URL is the gateway's base URL (after Start).
func (a *App) URL() string { return "http://" + a.Addr() }

// Shutdown stops the process in three steps. For delay, /readyz fails
// while the listener still accepts and serves requests as usual, so that
// a load balancer still routing here (Kubernetes removes endpoints
// asynchronously) meets no refused connection. Then the listener closes
// and new generation requests get 503; those in flight have up to grace
// to finish, and the rest end with an explicit error, which is logged.
// Last the queue and the pool stop. Cancelling ctx ends the delay early.
func (a *App) Shutdown(ctx context.Context, delay, grace time.Duration) error {
	a.withdraw(ctx, delay)
	a.Gateway.Drain()
	graceCtx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	err := a.server.Shutdown(graceCtx)
	if err != nil {
		cut := a.Queue.Len()
		a.logger.Warn("shutdown grace period over; ending requests still in flight", "grace", grace, "requests", cut)
		a.Gateway.Cut()
		finalCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err = a.server.Shutdown(finalCtx)
	}
	a.stopQueue(ctx)
	a.Pool.Close()
	a.stopOps(ctx)
	a.closeStore() // after the queue: requests settled on the way out still reach it
	return err
}

// withdraw fails /readyz for delay while requests are still served.
func (a *App) withdraw(ctx context.Context, delay time.Duration) {
	if delay <= 0 {
		return
	}
	a.Gateway.Withdraw()
	a.logger.Info("not ready; serving until the listener closes", "delay", delay)
	select {
	case <-a.after(delay):
	case <-ctx.Done():
	}
}

// queueCloseTimeout bounds closing the queue backend at shutdown: every
// request still in flight has been answered by then, and the RocketMQ
// client's GracefulStop waits out its long poll (about 30 s), which it
// may finish in the background.
const queueCloseTimeout = 5 * time.Second

func (a *App) stopQueue(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, queueCloseTimeout)
	defer cancel()
	left, err := a.Queue.Close(ctx)
	if err != nil {
		a.logger.Warn("queue close", "err", err)
	}
	if n := len(left.IDs); n > 0 {
		a.logger.Warn("queue closed with requests still queued", "count", n)
	}
	if err := a.Consumer.Close(ctx); err != nil {
		a.logger.Warn("consumer close", "err", err)
	}
}

func (a *App) config() *config.File {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// Reload swaps in a new config's tenants, keys and quotas without touching
// queued requests. Listener, upstream and queue settings need a restart;
// Reload logs when they changed.
func (a *App) Reload(cfg *config.File) error {
	quotas, err := cfg.Quotas()
	if err != nil {
		return err
	}
	a.Table.Reload(quotas)
	a.mu.Lock()
	old := a.cfg
	a.cfg = cfg
	a.mu.Unlock()
	if old.Listen != cfg.Listen || old.Queue.Backend != cfg.Queue.Backend || old.Cluster != cfg.Cluster {
		a.logger.Warn("config reload: listen, queue and cluster settings take effect only after a restart")
	}
	a.logger.Info("config reloaded", "tenants", len(cfg.Tenants))
	return nil
}
