package vllmsim

import (
	"net/http"
	"strings"
)

// routeMethods are the methods a route of the simulator may have.
var routeMethods = []string{http.MethodGet, http.MethodPost}

// notFound answers a request no route matches as vLLM's FastAPI server
// does: 404 {"detail":"Not Found"}, or 405 {"detail":"Method Not
// Allowed"} with Allow when the path exists for another method.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range routeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = w.Write([]byte(`{"detail":"Method Not Allowed"}`))
		return
	}
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"detail":"Not Found"}`))
}
