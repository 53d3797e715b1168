package vllmsim

import (
	"encoding/json"
	"net/http"
)

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string       `json:"id"`
	Object      string       `json:"object"`
	Created     int64        `json:"created"`
	OwnedBy     string       `json:"owned_by"`
	Root        string       `json:"root"`
	Parent      *string      `json:"parent"`
	MaxModelLen int          `json:"max_model_len"`
	Permission  []permission `json:"permission"`
}

type permission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

// models serves GET /v1/models in vLLM's shape.
func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	created := s.started.Unix()
	list := modelList{Object: "list", Data: make([]modelCard, 0, len(s.cfg.Models))}
	for _, m := range s.cfg.Models {
		list.Data = append(list.Data, modelCard{
			ID: m, Object: "model", Created: created, OwnedBy: "vllm", Root: m,
			MaxModelLen: s.cfg.MaxModelLen,
			Permission: []permission{{
				ID: "modelperm-" + m, Object: "model_permission", Created: created,
				AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*",
			}},
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list) // a write error means the client left
}
