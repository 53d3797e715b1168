package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels serves GET /v1/models: the configured models merged with what
// the pool discovered, sorted.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if _, e := s.authenticate(r, dialectOpenAI); e != nil {
		dialectOpenAI.writeError(w, e)
		return
	}
	ids := slices.Concat(s.cfg.Models, s.cfg.Pool.Models())
	slices.Sort(ids)
	ids = slices.Compact(ids)
	created := time.Now().Unix()
	list := modelList{Object: "list", Data: make([]modelEntry, 0, len(ids))}
	for _, id := range ids {
		list.Data = append(list.Data, modelEntry{ID: id, Object: "model", Created: created, OwnedBy: "pacegate"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}
