package upstream

import (
	"log/slog"
	"time"
)

// markDown records a failure of u: it is left alone for its backoff,
// which doubles on each failure up to MaxDownBackoff. Failures of
// requests that were already in flight when it went down do not double
// it again.
func (p *Pool) markDown(u *upstream, cause error) {
	p.mu.Lock()
	now := time.Now()
	u.errors++
	if !u.healthy && now.Before(u.downUntil) {
		p.mu.Unlock()
		return
	}
	if u.backoff == 0 {
		u.backoff = p.cfg.DownBackoff
	} else {
		u.backoff = min(2*u.backoff, p.cfg.MaxDownBackoff)
	}
	u.healthy, u.downUntil = false, now.Add(u.backoff)
	u.conv.clear()
	backoff := u.backoff
	p.mu.Unlock()
	if p.index != nil {
		// Its conversations re-home: what it held is unreachable now, and
		// gone if it restarted.
		p.index.Drop(u.id)
	}
	p.log.Warn("upstream marked down", slog.String("upstream", u.url), slog.Duration("backoff", backoff), slog.Any("error", cause))
}

// markUp records a success: u is healthy and its backoff starts over.
// It reports whether u was down.
func (p *Pool) markUp(u *upstream) (recovered bool) {
	p.mu.Lock()
	was := u.healthy
	u.healthy, u.backoff, u.downUntil = true, 0, time.Time{}
	models := u.models
	p.mu.Unlock()
	if !was {
		p.log.Info("upstream healthy again", slog.String("upstream", u.url))
		p.freed(models) // its slots are usable again
	}
	return !was
}

// passiveUp is markUp for a request that succeeded. An upstream that
// discovers its models and recovers this way is probed at once: it may
// have come back serving other models, which should not wait for the
// next probe.
func (p *Pool) passiveUp(u *upstream) {
	if p.markUp(u) && u.dynamic {
		p.goProbe(u)
	}
}
