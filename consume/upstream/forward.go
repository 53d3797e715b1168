package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// ErrPinnedGone is returned for a request pinned to an upstream the pool
// does not have (any more): the state it was pinned for is gone.
var ErrPinnedGone = errors.New("upstream: pinned upstream is not in the pool")

// Forward performs req outside the queue, in the caller's goroutine: on
// req.Upstream when it is set, otherwise on the available upstream
// serving req.Key.Model with the fewest requests in flight. A direct
// request (tokenize, count_tokens, a stored response's retrieval) is
// short and not counted against MaxConcurrency, so it neither waits for
// nor takes a generation slot. Events and errors are as for
// [consume.Slot.Do].
func (p *Pool) Forward(ctx context.Context, req *consume.Request, emit consume.Emitter) error {
	s, err := p.pick(req.Key.Model, req.Upstream, false)
	if err != nil {
		return err
	}
	return s.Do(ctx, req, emit)
}

// Pinned reports whether the upstream with url is in the pool and
// whether it is available (healthy, or past its backoff).
func (p *Pool) Pinned(url string) (known, available bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range p.ups {
		if u.url == url {
			return true, u.available(time.Now())
		}
	}
	return false, false
}

// pick takes a slot on the upstream with url (when set) or on the least
// loaded available upstream serving model, regardless of its concurrency
// limit. A counted slot adds to the upstream's requests in flight: a
// pinned generation request may take its upstream past MaxConcurrency,
// because no other upstream can serve it.
func (p *Pool) pick(model, url string, counted bool) (*slot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var best *upstream
	for _, u := range p.ups {
		switch {
		case url != "" && u.url == url:
			if !u.available(now) {
				return nil, fmt.Errorf("%w: %s is down", ErrUpstreamUnavailable, url)
			}
			best = u
		case url != "" || !u.available(now) || !u.serves(model):
			continue
		case best == nil || u.inFlight < best.inFlight:
			best = u
		}
	}
	switch {
	case best == nil && url != "":
		return nil, fmt.Errorf("%w: %s", ErrPinnedGone, url)
	case best == nil:
		return nil, fmt.Errorf("%w: no available upstream serves %q", ErrUpstreamUnavailable, model)
	}
	if counted {
		p.add(best, 1, now)
	}
	return &slot{p: p, u: best, uncounted: !counted}, nil
}
