package vllmsim

import (
	"context"
	"time"
)

// seq is one request while it holds a running slot: when its next token
// is due. It is created by [Server.begin], used by one goroutine and
// ended by [seq.end].
type seq struct {
	s       *Server
	j       *job
	next    time.Time     // when the next token is due
	itl     time.Duration // before the load factor
	emitted int           // tokens produced so far
}

// begin takes a running slot for j, waiting in FIFO order, and schedules
// its first token TTFT from now, stretched by the load factor. It fails
// only when ctx is done, and then reports whether j was still queued.
func (s *Server) begin(ctx context.Context, j *job) (q *seq, queued bool, err error) {
	if queued, err := s.acquire(ctx); err != nil {
		return nil, queued, err
	}
	ttft, itl := s.latency()
	q = &seq{s: s, j: j, itl: itl}
	q.next = time.Now().Add(scale(ttft, s.loadFactor()))
	return q, false, nil
}

// wait sleeps until the next token is due or ctx is done.
func (q *seq) wait(ctx context.Context) error { return sleepUntil(ctx, q.next) }

// produced records that the token just due was produced and schedules
// the next one ITL later, stretched by the load factor of now.
func (q *seq) produced() {
	q.emitted++
	q.next = q.next.Add(scale(q.itl, q.s.loadFactor()))
}

// waitTokens waits until the last of n tokens is due (the first one for
// n < 1). With a constant load factor it sleeps once; otherwise it steps
// token by token so that each gap reads the batch of its time.
func (q *seq) waitTokens(ctx context.Context, n int) error {
	n = max(n, 1)
	if q.s.cfg.TimeFactorUnderLoad == 1 || q.s.cfg.MaxNumSeqs == 1 {
		q.next = q.next.Add(time.Duration(n-1) * q.itl)
		q.emitted += n - 1
		n = 1
	}
	for range n - 1 {
		if err := q.wait(ctx); err != nil {
			return err
		}
		q.produced()
	}
	return q.wait(ctx)
}

// end frees the running slot.
func (q *seq) end() { q.s.release() }

// loadFactor is 1 + (F-1)·(running-1)/(MaxNumSeqs-1) for the current
// running batch (Config.TimeFactorUnderLoad).
func (s *Server) loadFactor() float64 {
	f, n := s.cfg.TimeFactorUnderLoad, s.cfg.MaxNumSeqs
	if f == 1 || n <= 1 {
		return 1
	}
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	return 1 + (f-1)*float64(max(running-1, 0))/float64(n-1)
}

// scale is d×f, rounded down to the nanosecond.
func scale(d time.Duration, f float64) time.Duration {
	if f == 1 {
		return d
	}
	return time.Duration(float64(d) * f)
}
