package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// responsesFields checks a Responses request: input is required,
// instructions and tools add to the prompt estimate, max_output_tokens
// bounds the output, and previous_response_id names a stored response
// the request must follow on its upstream.
func responsesFields(fields map[string]json.RawMessage, req *apiRequest) *APIError {
	if e := inputs([]string{"instructions", "tools"}, "input")(fields, req); e != nil {
		return e
	}
	if e := decodeLimits(fields, req, "max_output_tokens"); e != nil {
		return e
	}
	var prev string
	set, e := decodeOptional(fields, "previous_response_id", &prev)
	switch {
	case e != nil:
		return e
	case set && !validResponseID(prev):
		return errInvalidRequest("Invalid value for 'previous_response_id': not a response id.", "previous_response_id")
	}
	req.PreviousID = prev
	return nil
}

// validResponseID bounds what is looked up and put into upstream paths.
func validResponseID(id string) bool {
	return id != "" && len(id) <= maxModelNameBytes && !hasControl(id) && !strings.ContainsAny(id, "/?#%")
}

// PinnedPool is implemented by a Pool that can tell whether the upstream
// a stored response lives on is still there (*upstream.Pool). Without
// it, a follow-up is sent and the upstream's own answer decides.
type PinnedPool interface {
	Pinned(url string) (known, available bool)
}

// pinnedRetryAfter is the delay suggested when a stored response's
// upstream is down.
const pinnedRetryAfter = time.Second

// errResponseNotFound is the 404 for a response id that is unknown,
// expired, or another tenant's: the three are not told apart.
func errResponseNotFound(id, param string) *APIError {
	return &APIError{Status: http.StatusNotFound, Message: "Response with id '" + id + "' not found.",
		Type: "invalid_request_error", Param: param, Code: "not_found"}
}

// pinTo resolves the stored response id of tenant to its upstream. An id
// pacegate does not know for this tenant, or whose upstream has left the
// pool, is a 404: the response is gone for good. An upstream that is
// down is a 503 with Retry-After: it may come back with its memory, so a
// retry can still find the response.
func (s *Server) pinTo(id, tenant, param string) (pin, *APIError) {
	p, ok := s.affinity.lookup(id, tenant)
	if !ok {
		return pin{}, errResponseNotFound(id, param)
	}
	pc, ok := s.cfg.Pool.(PinnedPool)
	if !ok {
		return p, nil
	}
	switch known, available := pc.Pinned(p.upstream); {
	case !known:
		e := errResponseNotFound(id, param)
		e.Message = "Response with id '" + id + "' not found: the model server that stored it has left the pool."
		return pin{}, e
	case !available:
		e := errUnavailable("The model server that stored response '" + id + "' is unavailable; retry shortly.")
		e.RetryAfter = pinnedRetryAfter
		return pin{}, e
	}
	return p, nil
}

// followUp builds the request of a retrieval or cancel of a stored
// response: the id from the path, pinned where it lives.
func (s *Server) followUp(r *http.Request, rt *route, tenant string) (*apiRequest, *APIError) {
	id := chi.URLParam(r, "id")
	if !validResponseID(id) {
		return nil, errResponseNotFound(id, "response_id")
	}
	p, e := s.pinTo(id, tenant, "response_id")
	if e != nil {
		return nil, e
	}
	path := strings.Replace(rt.path, "{id}", url.PathEscape(id), 1)
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	req := &apiRequest{Model: p.model, Path: path, Method: rt.method, Upstream: p.upstream, WantsUsage: true,
		Stream: r.URL.Query().Get("stream") == "true"}
	return req, nil
}

// learnID remembers the id of a stored response that x created: from a
// body (a non-streamed or background response), or from the
// response.created event that opens a stream.
func (s *Server) learnID(x *exchange, name string, data []byte) {
	if !x.rt.learnIDs || x.learned {
		return
	}
	var id string
	switch {
	case name == "" && x.req.Stream:
		return
	case name == "":
		var f struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(data, &f) != nil {
			return
		}
		id = f.ID
	case name == "response.created":
		var f struct {
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if json.Unmarshal(data, &f) != nil {
			return
		}
		id = f.Response.ID
	default:
		return
	}
	if validResponseID(id) {
		x.learned = true
		s.affinity.learn(id, x.key.Tenant, x.key.Model, x.upstream)
	}
}
