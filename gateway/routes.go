package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/pacegate/pacegate/consume"
)

// kind is how a route reaches the pool.
type kind uint8

const (
	// kindQueued: queued in the tenant+model bucket, released at its
	// rate, fair-shared, with queue heartbeats on a stream. Everything
	// that occupies the GPUs: generation, embeddings, rerank, audio.
	kindQueued kind = iota
	// kindDirect: authenticated and capped, then forwarded at once to an
	// available upstream serving the model, outside the bucket queue and
	// its concurrency limit. Cheap calls a client makes before or beside
	// a generation (tokenize, count_tokens): queueing them behind that
	// generation would make a client wait for its own request.
	kindDirect
	// kindFollowUp: a stored response's retrieval or cancel; direct, and
	// pinned to the upstream that stored it, for its tenant only.
	kindFollowUp
)

// charge is what a route reserves against the TPM window at admission
// (reconciled with the reported usage at the end).
type charge uint8

const (
	// chargeGeneration: the prompt estimate plus the request's output
	// limit (max_tokens, max_output_tokens ...), or the default.
	chargeGeneration charge = iota
	// chargeInput: the input estimate only (embeddings, rerank, score).
	chargeInput
	// chargeRequest: no tokens; the request counts against RPM only
	// (tokenize, count_tokens, follow-ups: no model work to meter).
	chargeRequest
)

// route is one entry of the route table: everything the handler needs
// to know about an API path.
type route struct {
	method, path string
	// upstream is the upstream path; empty means path.
	upstream string
	dialect  dialect
	kind     kind
	shape    consume.Shape
	charge   charge
	// form: the body is multipart/form-data (audio), not JSON.
	form bool
	// forceUsage: a stream asks the upstream for the usage chunk (chat,
	// completions), which the client gets only if it asked for it.
	forceUsage bool
	// learnIDs: the response's id is remembered with its tenant and
	// upstream, for follow-ups (Responses).
	learnIDs bool
	// fields validates the route's own fields and estimates the input.
	// Nil for follow-ups, which have no body.
	fields func(fields map[string]json.RawMessage, req *apiRequest) *APIError
	// prompt is the request's prompt, for prefix routing: nil for a route
	// whose input no later request extends (embeddings, rerank ...).
	prompt []promptPart
}

// upstreamPath is where the route goes upstream.
func (rt *route) upstreamPath() string {
	if rt.upstream != "" {
		return rt.upstream
	}
	return rt.path
}

// routeTable is every API route pacegate serves besides /v1/models and
// the health endpoints. The README's route table mirrors it.
var routeTable = []*route{
	{method: http.MethodPost, path: "/v1/chat/completions", forceUsage: true, fields: generation("messages"), prompt: chatPrompt},
	{method: http.MethodPost, path: "/v1/completions", forceUsage: true, fields: generation("prompt"), prompt: completionPrompt},

	{method: http.MethodPost, path: "/v1/responses", shape: consume.ShapeResponses, learnIDs: true, fields: responsesFields, prompt: responsesPrompt},
	{method: http.MethodGet, path: "/v1/responses/{id}", kind: kindFollowUp, shape: consume.ShapeResponses, charge: chargeRequest},
	{method: http.MethodPost, path: "/v1/responses/{id}/cancel", kind: kindFollowUp, shape: consume.ShapeResponses, charge: chargeRequest},

	{method: http.MethodPost, path: "/v1/messages", dialect: dialectAnthropic, shape: consume.ShapeAnthropic, fields: messagesFields, prompt: messagesPrompt},
	{method: http.MethodPost, path: "/v1/messages/count_tokens", dialect: dialectAnthropic, kind: kindDirect, shape: consume.ShapeAnthropic,
		charge: chargeRequest, fields: inputs(nil, "messages")},

	{method: http.MethodPost, path: "/v1/embeddings", charge: chargeInput, fields: oneOf("input", "messages")},
	{method: http.MethodPost, path: "/v1/rerank", charge: chargeInput, fields: inputs(nil, "query", "documents")},
	{method: http.MethodPost, path: "/rerank", charge: chargeInput, fields: inputs(nil, "query", "documents")},
	{method: http.MethodPost, path: "/v2/rerank", charge: chargeInput, fields: inputs(nil, "query", "documents")},
	{method: http.MethodPost, path: "/score", charge: chargeInput, fields: inputs(nil, "text_1", "text_2")},
	{method: http.MethodPost, path: "/v1/score", charge: chargeInput, fields: inputs(nil, "text_1", "text_2")},

	{method: http.MethodPost, path: "/tokenize", kind: kindDirect, charge: chargeRequest, fields: oneOf("prompt", "messages")},
	{method: http.MethodPost, path: "/detokenize", kind: kindDirect, charge: chargeRequest, fields: inputs(nil, "tokens")},

	{method: http.MethodPost, path: "/v1/audio/transcriptions", form: true},
	{method: http.MethodPost, path: "/v1/audio/translations", form: true},
}

// mount registers every route of the table on r.
func (s *Server) mount(r chi.Router) {
	for _, rt := range routeTable {
		r.Method(rt.method, rt.path, s.serve(rt))
	}
}

// dialectOf is the dialect of a path no route matched, so that its 404
// or 405 comes in the shape its client parses.
func dialectOf(path string) dialect {
	if path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/") {
		return dialectAnthropic
	}
	return dialectOpenAI
}
