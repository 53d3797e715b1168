package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/gateway/admin"
	"github.com/pacegate/pacegate/gateway/control"
	"github.com/pacegate/pacegate/gateway/metrics"
	"github.com/pacegate/pacegate/policy/config"
)

// ops is the operator side of the process: the admin listener (admin API,
// matrix page and /metrics) and the closed control loop. Its fields are
// set by Start and read by Shutdown, which the App's lifecycle
// serialises.
type ops struct {
	srv  *http.Server // nil when the admin API is off
	ln   net.Listener
	done chan struct{} // closed when the admin server has stopped serving
}

// newOps builds the metrics and the control loop, and makes the metrics
// the observer of every layer whose observer opts leaves nil. It runs in
// New after the table and pacer exist and before the pool, which takes
// its observer at construction.
func (a *App) newOps(cfg *config.File, opts *Options) {
	a.fairness = fairshare.New(0)
	a.Metrics = metrics.New(metrics.Config{Buckets: a.Queue, Factors: a.Pacer, Fairness: a.fairness,
		Upstreams: upstreamStats(func() *upstream.Pool { return a.Pool }), Models: a.servedModels})
	if opts.GatewayObserver == nil {
		opts.GatewayObserver = a.Metrics
	}
	if opts.ConsumerObserver == nil {
		opts.ConsumerObserver = a.Metrics
	}
	if opts.UpstreamObserver == nil {
		opts.UpstreamObserver = a.Metrics
	}
	if cfg.Control.Enabled {
		a.Control = control.NewLoop(control.Options{Config: control.FromConfig(cfg.Control), Pacer: a.Pacer,
			Upstreams: a.upstreamURLs, Logger: a.logger})
	}
}

// upstreamStats reads the pool at scrape time (the pool is built after
// the metrics that observe it).
type upstreamStats func() *upstream.Pool

func (f upstreamStats) Stats() []upstream.UpstreamStat {
	if p := f(); p != nil {
		return p.Stats()
	}
	return nil
}

// servedModels is what the pool discovered plus the config's models.
func (a *App) servedModels() []string {
	ms := slices.Concat(a.Pool.Models(), a.config().Models)
	slices.Sort(ms)
	return slices.Compact(ms)
}

func (a *App) upstreamURLs() []string {
	stats := a.Pool.Stats()
	urls := make([]string, len(stats))
	for i, s := range stats {
		urls[i] = s.URL
	}
	return urls
}

// startOps starts the control loop and, when a token is configured, the
// admin listener.
func (a *App) startOps(ctx context.Context) error {
	cfg := a.config()
	if a.Control != nil {
		if err := a.Control.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		a.logger.Info("control loop started", "interval", cfg.Control.Interval, "waiting_target", cfg.Control.WaitingTarget)
	}
	if cfg.Admin.Token == "" {
		a.logger.Info("admin API off: no admin.token or PACEGATE_ADMIN_TOKEN configured (metrics and the matrix page are served only on the admin listener)")
		return nil
	}
	ln, err := a.listenAdmin(cfg.Admin.Listen)
	if err != nil {
		return err
	}
	h := admin.New(admin.Config{Token: cfg.Admin.Token, Table: a.Table, Pacer: a.Pacer, Buckets: a.Queue, Fairness: a.fairness, Upstreams: a.Pool.Stats,
		Models: a.servedModels, Control: a.Control, Metrics: a.Metrics.Handler(), Logger: a.logger,
		AuthBurst: cfg.Admin.AuthBurst, AuthRefill: cfg.Admin.AuthRefill, AuthMaxSources: cfg.Admin.AuthMaxSources})
	a.ops = ops{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn)}, ln: ln, done: make(chan struct{})}
	go a.ops.serve(a.logger)
	a.logger.Info("admin API listening", "addr", ln.Addr().String(), "ui", a.AdminURL()+"/admin/ui")
	return nil
}

func (o *ops) serve(logger *slog.Logger) {
	defer close(o.done)
	if err := o.srv.Serve(o.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("admin server stopped", "err", err)
	}
}

// AdminAddr is the admin listener's address, or "" when it is off.
func (a *App) AdminAddr() string {
	if a.ops.ln == nil {
		return ""
	}
	return a.ops.ln.Addr().String()
}

// AdminURL is the admin listener's base URL, or "" when it is off. A
// listener on every interface is reached through loopback.
func (a *App) AdminURL() string {
	addr := a.AdminAddr()
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// listenAdmin listens on addr or, when it is taken and a fallback is
// set (a demo), on the fallback.
func (a *App) listenAdmin(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil || a.adminFallback == "" || !errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	a.logger.Warn("admin address in use; the admin API listens on a free port instead", "addr", addr, "fallback", a.adminFallback)
	return net.Listen("tcp", a.adminFallback)
}

// stopOps stops the loop and the admin server. It runs last in Shutdown,
// so operators can watch the drain on the matrix page and /metrics.
func (a *App) stopOps(ctx context.Context) {
	if a.Control != nil {
		a.Control.Stop()
	}
	if a.ops.srv == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := a.ops.srv.Shutdown(sctx); err != nil {
		_ = a.ops.srv.Close()
	}
	<-a.ops.done
}
