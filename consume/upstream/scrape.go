package upstream

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
)

// readLoop reads every learning upstream's /metrics each MetricsInterval
// until ctx is done. Each round waits for all its reads, each bounded by
// the interval, so rounds never overlap and at most one read per
// upstream is under way.
func (p *Pool) readLoop(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.MetricsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.readAll(ctx)
		}
	}
}

// readAll reads the metrics of every learning upstream, in parallel.
func (p *Pool) readAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, u := range p.ups {
		if u.learns {
			wg.Go(func() { p.read(ctx, u) })
		}
	}
	wg.Wait()
}

// read takes one reading of u's /metrics and applies it. A panic is
// logged and kills only this reading.
func (p *Pool) read(ctx context.Context, u *upstream) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("upstream metrics read panicked", slog.String("upstream", u.url), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	rctx, cancel := context.WithTimeout(ctx, p.cfg.MetricsInterval)
	defer cancel()
	r, err := vllmmetrics.Fetch(rctx, p.client, u.url)
	if ctx.Err() != nil {
		return // shutting down: not the upstream's fault
	}
	p.applyReading(u, r, err)
}

// applyReading feeds one reading, or its failure, to u's learner and
// says so when u starts or stops falling back to MaxConcurrency. A limit
// that grew frees room for the models u serves. The cache size it reports
// sizes u's part of the prefix index.
func (p *Pool) applyReading(u *upstream, r vllmmetrics.Reading, err error) {
	p.mu.Lock()
	was := u.metricsOK
	grew := false
	if err != nil {
		u.fails++
		if u.fails >= metricsFailAfter {
			u.metricsOK = false
		}
	} else {
		u.fails, u.metricsOK = 0, true
		u.gauges = vllmmetrics.Sum(r.Models)
		u.speed.observe(u.gauges)
		before := u.limit(false)
		u.learn.observe(u.gauges, u.inFlight, int(u.reserved.Load()))
		grew = u.limit(false) > before
	}
	grew = grew || (!was && u.metricsOK && u.learn.limit > u.max) || (was && !u.metricsOK && u.max > u.learn.limit)
	now, models, limit, fallback := u.metricsOK, u.models, u.learn.limit, u.max
	p.mu.Unlock()
	if p.index != nil && r.CacheTokens > 0 {
		p.index.Size(u.id, r.CacheTokens)
	}
	switch {
	case was && !now:
		p.log.Warn("upstream metrics unreadable: its limit falls back to max_concurrency", slog.String("upstream", u.url),
			slog.Int("max_concurrency", fallback), slog.Any("error", err))
	case !was && now:
		p.log.Info("upstream metrics read: its limit is learned", slog.String("upstream", u.url), slog.Int("limit", limit))
	}
	if grew {
		p.freed(models)
	}
}
