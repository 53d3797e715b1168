package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/pacegate/pacegate/sse"
)

// dialect is an API family's wire conventions at the gateway's edge: how
// a client sends its key, and the shape of an error, as a body and inside
// a stream.
type dialect uint8

const (
	// dialectOpenAI: Authorization: Bearer, {"error":{...}} bodies, a
	// streamed error as a data event (chat) or an "error" event
	// (Responses).
	dialectOpenAI dialect = iota
	// dialectAnthropic: x-api-key (or Bearer),
	// {"type":"error","error":{"type","message"}} bodies, a streamed
	// error as an "error" event with that body.
	dialectAnthropic
)

// apiKey is the key the client sent and whether it sent one. Anthropic
// clients send x-api-key (with anthropic-version); a Bearer token is
// accepted beside it, as some of them send that instead.
func (d dialect) apiKey(r *http.Request) (string, bool) {
	if d == dialectAnthropic {
		if k := strings.TrimSpace(r.Header.Get("X-Api-Key")); k != "" {
			return k, true
		}
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return "", false
	}
	return strings.TrimSpace(key), true
}

// setRequestID sends the request's id where the dialect's SDKs read it:
// X-Request-Id on every response (OpenAI's SDKs, logs, support), and on
// Anthropic paths request-id as well, which anthropic-sdk-go reports as
// Error.RequestID and the Python and TypeScript SDKs as _request_id and
// requestID.
func (d dialect) setRequestID(h http.Header, id string) {
	h.Set("X-Request-Id", id)
	if d == dialectAnthropic {
		h.Set("Request-Id", id)
	}
}

// missingKey is the message of a 401 without a key.
func (d dialect) missingKey() string {
	if d == dialectAnthropic {
		return "You didn't provide an API key. Send it as 'x-api-key: <key>' or 'Authorization: Bearer <key>'."
	}
	return "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'."
}

// body renders e in the dialect's error shape.
func (d dialect) body(e *APIError) []byte {
	if d != dialectAnthropic {
		return e.MarshalBody()
	}
	b, _ := json.Marshal(anthropicError{Type: "error", Error: anthropicDetail{Type: anthropicType(e), Message: e.Message}})
	return b
}

// writeError sends e as a JSON response in the dialect's shape, with
// Retry-After and retry-after-ms when e has a delay; headers already set
// on w (request id, rate-limit headers) are kept.
func (d dialect) writeError(w http.ResponseWriter, e *APIError) {
	h := w.Header()
	if e.RetryAfter > 0 {
		setRetryAfter(h, e.RetryAfter)
	}
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	_, _ = w.Write(d.body(e)) // a client that left cannot be told more
}

// streamError ends a started stream with e, as each family's SDKs
// recognise an error: chat and completions as a data event with an
// "error" object (what vLLM sends); Anthropic as "event: error" with its
// error body; Responses as "event: error" whose data is the Responses
// error event (type, code, message, param) that also carries the
// "error" object, because openai-go, -python and -node raise only on
// that key and would otherwise hand the event over as an ordinary one.
func (d dialect) streamError(sw *sse.Writer, named bool, e *APIError) error {
	switch {
	case d == dialectAnthropic:
		return sw.Event("error", d.body(e))
	case named:
		return sw.Event("error", responsesErrorEvent(e))
	default:
		return sw.Data(e.MarshalBody())
	}
}

type anthropicError struct {
	Type  string          `json:"type"`
	Error anthropicDetail `json:"error"`
}

type anthropicDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthropicType maps a status to Anthropic's error types
// (https://docs.anthropic.com/en/api/errors).
func anthropicType(e *APIError) string {
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

// responsesErrorEvent is the data of a Responses stream's error event.
func responsesErrorEvent(e *APIError) []byte {
	var ev struct {
		Type    string          `json:"type"`
		Code    *string         `json:"code"`
		Message string          `json:"message"`
		Param   *string         `json:"param"`
		Error   json.RawMessage `json:"error"`
	}
	ev.Type, ev.Message = "error", e.Message
	if e.Code != "" {
		ev.Code = &e.Code
	}
	if e.Param != "" {
		ev.Param = &e.Param
	}
	var env errorBody
	_ = json.Unmarshal(e.MarshalBody(), &env)
	ev.Error, _ = json.Marshal(env.Error)
	b, _ := json.Marshal(ev) // strings only
	return b
}
