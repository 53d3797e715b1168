package vllmsim

import (
	"context"
	"time"
)

// waiter is a request waiting for a running slot.
type waiter struct {
	ready   chan struct{} // closed when the slot is handed over
	granted bool          // guarded by Server.mu
	running int           // the batch it joined, set with granted
}

// acquire takes a running slot, waiting in FIFO order while all
// MaxNumSeqs are taken, and returns the size of the batch it joined (the
// request included), read as it joins: two requests that start together
// then read 1 and 2, whatever order their goroutines run in next. It
// fails only when ctx is done, and then reports whether the request was
// still queued.
func (s *Server) acquire(ctx context.Context) (running int, queued bool, err error) {
	s.mu.Lock()
	if s.running < s.cfg.MaxNumSeqs && len(s.queue) == 0 {
		s.running++
		running = s.running
		s.mu.Unlock()
		return running, false, nil
	}
	w := &waiter{ready: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return w.running, false, nil // granted is set before ready closes
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.granted {
		// The slot arrived as the client left: pass it on.
		s.mu.Unlock()
		s.release()
		return 0, true, ctx.Err()
	}
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	return 0, true, ctx.Err()
}

// release frees a running slot, handing it to the oldest waiter. The
// last running request to end stops the engine's step clock.
func (s *Server) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.running--
		if s.running == 0 {
			s.stepEnd, s.step = time.Time{}, 0
		}
		return
	}
	w := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	w.granted, w.running = true, s.running
	close(w.ready)
}

// sleepUntil waits until t or until ctx is done. Deadlines are absolute
// so that token times do not drift with scheduling delays.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
