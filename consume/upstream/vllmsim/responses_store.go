package vllmsim

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
)

// storedResponse is a finished response kept for GET /v1/responses/{id}
// and previous_response_id.
type storedResponse struct {
	body    []byte // the response object, as sent or as it is now
	history int    // input tokens (without instructions) plus output tokens
	turn    *turn  // the conversation so far, for the prefix cache; nil when off
	// cancel, while a background response is queued or in progress,
	// stops its generation; cancelled is then its body once cancelled.
	cancel    context.CancelFunc
	cancelled []byte
}

// turn is one stored response's part of a conversation as the prefix
// cache lays it out for a follow-up: the turns before it, its input and
// its output length (the output's words are known from it). Turns share
// their predecessors, so a conversation is kept once however many of its
// responses are stored.
type turn struct {
	prev   *turn
	input  json.RawMessage
	output int
}

// responseStore holds this instance's stored responses, evicting the
// oldest beyond max. It is safe for concurrent use; its mutex is never
// held with Server.mu.
type responseStore struct {
	mu    sync.Mutex
	max   int
	byID  map[string]storedResponse
	order []string // ids, oldest first
}

func newResponseStore(max int) *responseStore {
	return &responseStore{max: max, byID: make(map[string]storedResponse)}
}

func (st *responseStore) put(id string, r storedResponse) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.max <= 0 {
		return
	}
	if _, ok := st.byID[id]; !ok {
		st.order = append(st.order, id)
	}
	st.byID[id] = r
	for len(st.order) > st.max {
		delete(st.byID, st.order[0])
		st.order = st.order[1:]
	}
}

// progress replaces the body of an active (queued or in-progress)
// background response.
func (st *responseStore) progress(id string, body []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if r, ok := st.byID[id]; ok && r.cancel != nil {
		r.body = body
		st.byID[id] = r
	}
}

// finish replaces an active background response by its finished form
// and reports whether it was still active (not cancelled or evicted).
func (st *responseStore) finish(id string, done storedResponse) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if r, ok := st.byID[id]; !ok || r.cancel == nil {
		return false
	}
	st.byID[id] = done
	return true
}

// cancel stops an active background response and returns its cancelled
// body; found is false for an unknown id, active false for a finished
// response.
func (st *responseStore) cancel(id string) (body []byte, found, active bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.byID[id]
	if !ok || r.cancel == nil {
		return r.body, ok, false
	}
	r.cancel()
	r.body, r.cancel = r.cancelled, nil
	st.byID[id] = r
	return r.body, true, true
}

func (st *responseStore) get(id string) (storedResponse, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.byID[id]
	return r, ok
}

// getResponse serves GET /v1/responses/{id}.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	stored, ok := s.store.get(id)
	if !ok {
		responseNotFound(id).write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(stored.body) // a write error means the client left
}

// cancelResponse serves POST /v1/responses/{id}/cancel: a queued or
// in-progress background response is cancelled and returned; vLLM
// refuses any other with 400.
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, found, active := s.store.cancel(id)
	switch {
	case !found:
		responseNotFound(id).write(w)
	case !active:
		(&apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
			msg: "Cannot cancel a synchronous response."}).write(w)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body) // a write error means the client left
	}
}
