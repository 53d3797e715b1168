package vllmsim

import (
	"context"
	"net/http"
)

// startBackground answers a background response at once with its queued
// form, stored, and generates it in a goroutine the Server owns: the
// stored response turns in_progress once it has a running slot and
// completed when its last token is due, unless it is cancelled first.
func (s *Server) startBackground(w http.ResponseWriter, r *http.Request, o *responsesOut) {
	if _, _, ok := s.admit(w, r, o.j); !ok {
		return
	}
	j := o.j
	ctx, cancel := context.WithCancel(s.bgCtx)
	queued := storedResponse{body: o.objectJSON("queued"), history: o.history, turn: o.turn(0), cancel: cancel, cancelled: o.objectJSON("cancelled")}
	s.store.put(j.respID, queued)
	if !s.goBackground(func() {
		defer cancel()
		s.generateBackground(ctx, o)
	}) {
		cancel()
		o.writeError(w, &apiError{status: http.StatusServiceUnavailable, typ: "ServiceUnavailableError", msg: "The simulator is closed."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(queued.body) // a write error means the client left; the response goes on
}

// generateBackground runs one background response until it is complete
// or ctx (cancel, Close) ends it.
func (s *Server) generateBackground(ctx context.Context, o *responsesOut) {
	j := o.j
	q, queued, err := s.begin(ctx, j)
	if err != nil {
		s.store.cancel(j.respID) // after Close; a no-op after a cancel
		s.abort(j.id, queued)
		return
	}
	defer q.end()
	s.store.progress(j.respID, o.objectJSON("in_progress"))
	if q.waitTokens(ctx, j.maxTokens) != nil {
		s.store.cancel(j.respID)
		s.abort(j.id, false)
		return
	}
	if s.store.finish(j.respID, o.stored()) {
		s.genTokens.Add(int64(j.maxTokens))
		s.completed.Add(1)
	}
}

// goBackground starts f in a goroutine that Close waits for; it refuses
// once Close has begun.
func (s *Server) goBackground(f func()) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return false
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f()
	}()
	return true
}

// Close cancels the background responses in progress and waits for
// their goroutines. The Server still answers requests afterwards but
// refuses new background responses with 503. Close may be called more
// than once.
func (s *Server) Close() {
	s.bgMu.Lock()
	s.bgClosed = true
	s.bgMu.Unlock()
	s.bgCancel()
	s.bg.Wait()
}
