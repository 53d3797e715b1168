package vllmsim

import (
	"net/http"
	"sync"
)

// storedResponse is a finished response kept for GET /v1/responses/{id}
// and previous_response_id.
type storedResponse struct {
	body    []byte // the response object, as sent
	history int    // input tokens (without instructions) plus output tokens
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

// cancelResponse serves POST /v1/responses/{id}/cancel. Every stored
// response was created synchronously and is finished, so vLLM refuses.
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := s.store.get(id); !ok {
		responseNotFound(id).write(w)
		return
	}
	(&apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
		msg: "Cannot cancel a synchronous response."}).write(w)
}
