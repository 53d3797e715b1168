package vllmsim

import (
	"context"
	"time"
)

// waiter is a request waiting for a running slot.
type waiter struct {
	ready   chan struct{} // closed when the slot is handed over
	granted bool          // guarded by Server.mu
}

// acquire takes a running slot, waiting in FIFO order while all
// MaxNumSeqs are taken. It fails only when ctx is done, and then reports
// whether the request was still queued.
func (s *Server) acquire(ctx context.Context) (queued bool, err error) {
	s.mu.Lock()
	if s.running < s.cfg.MaxNumSeqs && len(s.queue) == 0 {
		s.running++
		s.mu.Unlock()
		return false, nil
	}
	w := &waiter{ready: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return false, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.granted {
		// The slot arrived as the client left: pass it on.
		s.mu.Unlock()
		s.release()
		return true, ctx.Err()
	}
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	return true, ctx.Err()
}

// release frees a running slot, handing it to the oldest waiter.
func (s *Server) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.running--
		return
	}
	w := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	w.granted = true
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
