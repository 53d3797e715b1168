package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream/prefix"
)

// slot is capacity reserved on one upstream. It implements
// [consume.Slot] and is safe for concurrent use; Do may be called once.
type slot struct {
	p        *Pool
	u        *upstream
	headroom bool // taken by TryAcquireHeadroom: a retry may use headroom too
	used     atomic.Bool
	released atomic.Bool
	// uncounted: a direct request's slot, not counted in u.inFlight.
	uncounted bool
	// reserved: taken by acquire, so counted in u.reserved until take.
	reserved bool
	// served is the upstream that answered Do's request, and matched the
	// prompt blocks the prefix index predicted it held: what Cached
	// learns from. Written by Do, read after it, by the same goroutine.
	served  *upstream
	matched int
}

var errSlotUsed = errors.New("upstream: slot already used or released")

// Release implements [consume.Slot.Release]; it is idempotent.
func (s *slot) Release() {
	if s.released.CompareAndSwap(false, true) && !s.uncounted {
		s.take() // a slot released unused is no longer reserved either
		s.p.release(s.u)
	}
}

// take marks s used, once: it reports false if it was already. A slot
// from acquire stops counting as reserved on its upstream then, whether a
// call uses it or it is released unused.
func (s *slot) take() bool {
	if !s.used.CompareAndSwap(false, true) {
		return false
	}
	if s.reserved {
		s.u.reserved.Add(-1)
	}
	return true
}

// Do implements [consume.Slot.Do]. A failure before the first response
// byte is retried once on another upstream that has room; after it,
// never.
func (s *slot) Do(ctx context.Context, req *consume.Request, emit consume.Emitter) error {
	if s.released.Load() || !s.take() {
		return errSlotUsed
	}
	cur := s
	defer func() { cur.Release() }()
	if req.Upstream != "" && req.Upstream != s.u.url {
		pin, err := s.p.pick(req.Key.Model, req.Upstream, !s.uncounted)
		if err != nil {
			return err
		}
		cur.Release()
		cur = pin
		cur.take()
	} else if s.p.index != nil && len(req.Prefix) > 0 && req.Upstream == "" && !s.uncounted {
		s.p.route(s, req)
		s.p.record(s.u.id, req)
	}
	s.served = cur.u
	for attempt := 1; ; attempt++ {
		resp, cancel, retry, err := cur.send(ctx, req)
		if err == nil {
			err = cur.relay(ctx, cancel, resp, req, emit)
			cancel()
			cur.p.observe(cur.u, resp.StatusCode, err)
			return err
		}
		if !retry || attempt > 1 || ctx.Err() != nil || req.Upstream != "" {
			return err
		}
		next := s.p.acquire(req.Key.Model, cur.u, s.headroom)
		if next == nil {
			return err
		}
		s.p.log.Info("retrying on another upstream", slog.String("request_id", req.ID),
			slog.String("failed", cur.u.url), slog.String("next", next.u.url), slog.Any("error", err))
		cur.Release()
		cur = next
		cur.take()
		s.served, s.matched = next.u, 0
		if s.p.index != nil && len(req.Prefix) > 0 {
			s.p.record(next.u.id, req)
		}
	}
}

// send posts req and returns a 2xx response whose body the caller reads
// and whose cancel it calls. Otherwise it returns the error and whether
// another upstream may be tried.
func (s *slot) send(ctx context.Context, req *consume.Request) (*http.Response, context.CancelFunc, bool, error) {
	// Our own cancel aborts the upstream call when emit fails, even if
	// the caller's ctx lives on.
	actx, cancel := context.WithCancel(ctx)
	method, ct := req.Method, req.ContentType
	if method == "" {
		method = http.MethodPost
	}
	if ct == "" {
		ct = "application/json"
	}
	hreq, err := http.NewRequestWithContext(actx, method, s.u.url+req.Path, bytes.NewReader(req.Body))
	if err != nil {
		cancel()
		return nil, nil, false, fmt.Errorf("upstream: building request: %w", err)
	}
	for k, vs := range req.Header {
		hreq.Header[k] = vs
	}
	if len(req.Body) > 0 {
		hreq.Header.Set("Content-Type", ct)
	}
	hreq.Header.Set("X-Request-Id", req.ID)
	hreq.Header.Set("User-Agent", "pacegate")
	if req.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	resp, err := s.p.client.Do(hreq)
	if err != nil {
		cancel()
		s.p.observe(s.u, 0, err)
		if ctx.Err() != nil { // the caller gave up: not the upstream's fault
			return nil, nil, false, fmt.Errorf("upstream %s: %w", s.u.url, err)
		}
		s.p.markDown(s.u, err)
		return nil, nil, true, fmt.Errorf("%w: %s: %w", ErrUpstreamUnavailable, s.u.url, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		s.p.passiveUp(s.u)
		return resp, cancel, false, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBodyBytes))
	resp.Body.Close()
	cancel()
	serr := &StatusError{Status: resp.StatusCode, Body: body, Upstream: s.u.url}
	s.p.observe(s.u, resp.StatusCode, serr)
	// 501 is vLLM's answer for an API the loaded model lacks (an
	// embedding on a generation model): the server is fine.
	if resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented {
		s.p.markDown(s.u, serr)
		return nil, nil, true, serr
	}
	s.p.passiveUp(s.u) // it answered: alive
	return nil, nil, false, serr
}

// Cached implements [consume.CacheReporter]: the upstream that served
// the request reported cached of its prompt tokens as prefix-cache hits.
// It counts them, and corrects the prefix index's idea of the size of
// that upstream's cache.
func (s *slot) Cached(req *consume.Request, prompt, cached int64) {
	u := s.served
	if u == nil || prompt <= 0 {
		return
	}
	u.promptTokens.Add(prompt)
	u.cachedTokens.Add(cached)
	if s.p.index != nil && len(req.Prefix) > 0 {
		s.p.index.Feedback(u.id, prefix.Chain{Hashes: req.Prefix, Bytes: req.PromptBytes}, s.matched, prompt, cached)
	}
}

func (p *Pool) observe(u *upstream, status int, err error) {
	if p.cfg.Observer != nil {
		p.cfg.Observer.Result(u.url, status, err)
	}
}
