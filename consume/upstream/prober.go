package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// Start discovers the models of upstreams configured without any and
// reads the metrics of the learning ones once, then runs the prober and
// the metrics readings until ctx is done or Close is called. An upstream
// that cannot be reached is marked down and retried by the prober; Start
// fails only when called twice or after Close.
func (p *Pool) Start(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.started || p.closed {
		return ErrClosed
	}
	p.started = true
	p.ctx, p.cancel = context.WithCancel(ctx)
	ctx = p.ctx
	p.probeAll(ctx, true)
	p.wg.Add(1)
	go p.probeLoop(ctx)
	if p.cfg.MetricsInterval > 0 {
		// A first reading before any request: a learning upstream starts
		// at the learned limit's start, not at MaxConcurrency, so a first
		// burst does not pile onto a server with less room.
		p.readAll(ctx)
		p.wg.Add(1)
		go p.readLoop(ctx)
	}
	return nil
}

// Close stops the prober and the metrics readings, and waits for them. It is safe to call more than
// once, and without Start.
func (p *Pool) Close() {
	p.life.Lock()
	p.closed = true
	cancel := p.cancel
	p.life.Unlock()
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
}

// probeLoop probes every HealthInterval, except while the pool is not
// Ready: then it probes every upstream, backoff or not, every DownBackoff
// (if shorter). Nothing can be served until some upstream is back, and
// one that spent minutes loading its model would otherwise be at its
// longest backoff when it comes up.
func (p *Pool) probeLoop(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTimer(p.probeInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.probeAll(ctx, !p.Ready())
			t.Reset(p.probeInterval())
		}
	}
}

func (p *Pool) probeInterval() time.Duration {
	if p.Ready() {
		return p.cfg.HealthInterval
	}
	return min(p.cfg.HealthInterval, p.cfg.DownBackoff)
}

// goProbe probes u on a goroutine of its own that Close waits for. It
// does nothing unless the prober runs.
func (p *Pool) goProbe(u *upstream) {
	p.life.Lock()
	defer p.life.Unlock()
	if !p.started || p.closed {
		return
	}
	ctx := p.ctx
	p.wg.Go(func() { p.probe(ctx, u) })
}

// probeAll checks every upstream whose backoff has passed, in parallel,
// and returns when all checks are done. force probes even upstreams in
// backoff (at Start, and while the pool is not ready).
func (p *Pool) probeAll(ctx context.Context, force bool) {
	var wg sync.WaitGroup
	for _, u := range p.ups {
		p.mu.Lock()
		due := force || u.available(time.Now())
		p.mu.Unlock()
		if due {
			wg.Go(func() { p.probe(ctx, u) })
		}
	}
	wg.Wait()
}

// probe checks one upstream's /health and, for a discovering upstream,
// refreshes its models. A panic is logged and kills only this probe.
func (p *Pool) probe(ctx context.Context, u *upstream) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("upstream probe panicked", slog.String("upstream", u.url), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, min(p.cfg.HealthInterval, 5*time.Second))
	defer cancel()
	err := p.get(ctx, u.url+"/health", nil)
	if err == nil && u.dynamic {
		err = p.discover(ctx, u)
	}
	switch {
	case ctx.Err() != nil && err != nil: // shutting down: not the upstream's fault
	case err != nil:
		p.markDown(u, err)
	default:
		p.markUp(u)
	}
}

// discover replaces u's models with the ids from its /v1/models.
func (p *Pool) discover(ctx context.Context, u *upstream) error {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := p.get(ctx, u.url+"/v1/models", &list); err != nil {
		return err
	}
	models := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			models = append(models, m.ID)
		}
	}
	slices.Sort(models)
	models = slices.Compact(models)
	p.mu.Lock()
	changed := !slices.Equal(u.models, models)
	u.models = models
	p.mu.Unlock()
	if changed {
		p.freed(models) // buckets of a newly served model may be waiting
	}
	return nil
}

// get fetches url and decodes a JSON body into v (unless v is nil); any
// status but 200 is an error.
func (p *Pool) get(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 4<<20)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	if v == nil {
		_, err = io.Copy(io.Discard, body) // so the connection can be reused
		return err
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
