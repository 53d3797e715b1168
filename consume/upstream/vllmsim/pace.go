package vllmsim

import (
	"context"
	"time"
)

// seq is one request while it holds a running slot: when its next token
// is due, and (prefix cache on) the KV blocks it holds. It is created by
// [Server.begin], used by one goroutine and ended by [seq.end].
type seq struct {
	s       *Server
	j       *job
	next    time.Time     // when the next token is due
	last    time.Time     // when the last token was produced
	itl     time.Duration // before the load factor
	emitted int           // tokens produced so far

	// With the prefix cache on: j.blocks[:held] are pinned in it, and the
	// request holds blocks blocks in all (its prompt and output so far).
	held, blocks int
}

// begin takes a running slot for j, waiting in FIFO order, looks its
// prompt up in the prefix cache and schedules its first token after
// TTFT plus the prefill of its uncached prompt tokens, stretched by the
// load factor. It fails only when ctx is done,
// and then reports whether j was still queued.
func (s *Server) begin(ctx context.Context, j *job) (q *seq, queued bool, err error) {
	running, queued, err := s.acquire(ctx)
	if err != nil {
		return nil, queued, err
	}
	ttft, itl := s.latency()
	q = &seq{s: s, j: j, itl: itl}
	q.lookup()
	ttft += time.Duration(j.promptTokens-j.cachedTokens) * s.cfg.PrefillPerToken
	q.next = time.Now().Add(scale(ttft, s.factorOf(running)))
	return q, false, nil
}

// lookup pins the prompt's cached leading blocks and counts the query.
// As in vLLM, the prompt's last token is always computed, so a prompt
// found whole is cached up to the full block before its last token.
func (q *seq) lookup() {
	c, j := q.s.cache, q.j
	if c == nil {
		return
	}
	if j.cacheable {
		lookable := j.blocks[:min(len(j.blocks), max(j.promptTokens-1, 0)/BlockSize)]
		q.held = c.lookup(lookable)
		j.cachedTokens = q.held * BlockSize
		q.s.prefixQueries.Add(int64(j.promptTokens))
		q.s.prefixHits.Add(int64(j.cachedTokens))
	}
	q.blocks = blocksFor(j.promptTokens)
	c.addPrivate(q.blocks - q.held)
}

// wait sleeps until the next token is due, then until the end of the
// engine step in progress then (see [Server.stepEndAt]), or until ctx
// is done. q.next becomes the time the token is produced.
func (q *seq) wait(ctx context.Context) error {
	if err := sleepUntil(ctx, q.next); err != nil {
		return err
	}
	q.next = q.s.stepEndAt(q.next)
	return sleepUntil(ctx, q.next)
}

// produced records that the token just due was produced and schedules
// the next one at the end of the engine's next step (ITL later,
// stretched by the load factor of now, with Config.OwnClocks). The
// first token ends the prefill: the prompt's full blocks join the cache.
func (q *seq) produced() {
	if q.emitted > 0 {
		q.s.interToken(q.next.Sub(q.last), 1)
	}
	q.emitted++
	q.last = q.next
	if q.s.cfg.OwnClocks {
		q.next = q.last.Add(scale(q.itl, q.s.loadFactor()))
	} else {
		q.next = q.s.stepEndAt(q.last.Add(time.Nanosecond))
	}
	c := q.s.cache
	if c == nil {
		return
	}
	held, blocks := q.held, blocksFor(q.j.promptTokens+q.emitted)
	if q.emitted == 1 && q.j.cacheable {
		held = c.insert(q.j.blocks, q.held)
	}
	if d := (blocks - q.blocks) - (held - q.held); d != 0 {
		c.addPrivate(d)
	}
	q.held, q.blocks = held, blocks
}

// waitTokens waits until the last of n tokens is due (the first one for
// n < 1), producing each. With a constant load factor and no cache to
// tell it sleeps once; otherwise it steps token by token so that each
// gap reads the batch of its time.
func (q *seq) waitTokens(ctx context.Context, n int) error {
	steps := max(n, 1)
	if q.s.cache == nil && (q.s.cfg.TimeFactorUnderLoad == 1 || q.s.cfg.MaxNumSeqs == 1) {
		q.next = q.next.Add(time.Duration(steps-1) * q.itl)
		q.s.interToken(time.Duration(steps-1)*q.itl, steps-1)
		steps = 1
	}
	for i := range steps {
		if err := q.wait(ctx); err != nil {
			return err
		}
		if i < n {
			q.produced()
		}
	}
	return nil
}

// end frees the running slot and the blocks the request holds.
func (q *seq) end() {
	if c := q.s.cache; c != nil {
		c.release(q.j.blocks[:q.held])
		c.addPrivate(q.held - q.blocks)
	}
	q.s.release()
}

// blocksFor is how many blocks n tokens take.
func blocksFor(n int) int { return (n + BlockSize - 1) / BlockSize }

// loadFactor is 1 + (F-1)·(running-1)/(MaxNumSeqs-1) for the current
// running batch (Config.TimeFactorUnderLoad).
func (s *Server) loadFactor() float64 {
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	return s.factorOf(running)
}

// factorOf is the load factor of a batch of running requests.
func (s *Server) factorOf(running int) float64 {
	f, n := s.cfg.TimeFactorUnderLoad, s.cfg.MaxNumSeqs
	if f == 1 || n <= 1 {
		return 1
	}
	return 1 + (f-1)*float64(max(running-1, 0))/float64(n-1)
}

// interToken records n gaps between tokens that took d together, for
// the inter-token latency histogram of /metrics.
func (s *Server) interToken(d time.Duration, n int) {
	if n > 0 {
		s.itlNanos.Add(int64(d))
		s.itlTokens.Add(int64(n))
	}
}

// scale is d×f, rounded down to the nanosecond.
func scale(d time.Duration, f float64) time.Duration {
	if f == 1 {
		return d
	}
	return time.Duration(float64(d) * f)
}
