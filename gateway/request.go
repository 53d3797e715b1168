package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pacegate/pacegate/consume/jsonscan"
)

// apiRequest is what the gateway needs to know about a request. The body
// itself is forwarded with every field the client sent.
type apiRequest struct {
	Model        string
	Stream       bool
	WantsUsage   bool  // the client asked for the usage chunk itself
	MaxTokens    int64 // 0 when the client set none
	PromptTokens int64 // estimate, for the TPM reservation
	Body         []byte
	Path         string      // upstream path, with its query if any
	Method       string      // upstream method; empty means POST
	Header       http.Header // extra upstream headers (anthropic-version)
	ContentType  string      // the body's type; empty means application/json
	// PreviousID is a Responses request's previous_response_id, and
	// Upstream the upstream it is pinned to (found from it, or from a
	// follow-up's response id).
	PreviousID string
	Upstream   string
	// Prefix and PromptBytes are the prompt's chain for prefix routing
	// (consume.Request.Prefix); fields are the body's top-level fields,
	// kept from parsing until the chain is made.
	Prefix      []uint64
	PromptBytes int
	fields      map[string]json.RawMessage
}

// maxPrealloc bounds the allocation made ahead of a body's bytes.
const maxPrealloc = 1 << 20

// maxModelNameBytes bounds the model name, which ends up in queue names,
// metric labels and logs.
const maxModelNameBytes = 256

// readBody enforces the content type and the size limit.
func readBody(r *http.Request, limit int64) ([]byte, *APIError) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return nil, &APIError{Status: http.StatusUnsupportedMediaType,
			Message: "Content-Type must be application/json, got " + quoteOrEmpty(ct),
			Type:    "invalid_request_error"}
	}
	return readLimited(r, limit)
}

// readLimited reads the body, at most limit bytes: into one allocation
// when the client said its length (every SDK does), not through
// io.ReadAll's doublings; up to maxPrealloc only, so that a length said
// and not sent costs no more than that.
func readLimited(r *http.Request, limit int64) ([]byte, *APIError) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(min(n, maxPrealloc)) + bytes.MinRead) // MinRead: room to read the EOF
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, limit))
	body := buf.Bytes()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &APIError{Status: http.StatusRequestEntityTooLarge,
			Message: "Request body is larger than the limit of " + itoa(tooLarge.Limit) + " bytes.",
			Type:    "invalid_request_error"}
	case errors.Is(err, os.ErrDeadlineExceeded): // server.read_body_timeout
		return nil, &APIError{Status: http.StatusRequestTimeout,
			Message: "The request body did not arrive in time.", Type: "invalid_request_error"}
	case err != nil:
		return nil, errInvalidRequest("Could not read the request body.", "")
	}
	return body, nil
}

// parseAPIRequest validates the fields the gateway relies on (the model,
// stream, and the route's own) and returns the body to forward: for a
// streamed chat or completion it always asks the upstream for the usage
// chunk, so that the real tokens can be charged.
func parseAPIRequest(body []byte, rt *route) (*apiRequest, *APIError) {
	fields, ok := decodeFields(body)
	if !ok {
		return nil, errInvalidRequest("We could not parse the JSON body of your request: it must be a JSON object.", "")
	}
	req := &apiRequest{Path: rt.upstreamPath(), WantsUsage: !rt.forceUsage}
	if e := decodeModel(fields, req); e != nil {
		return nil, e
	}
	if _, e := decodeOptional(fields, "stream", &req.Stream); e != nil {
		return nil, e
	}
	if e := rt.fields(fields, req); e != nil {
		return nil, e
	}
	if req.Stream && rt.forceUsage {
		out, e := bodyWithUsage(body, fields, req)
		if e != nil {
			return nil, e
		}
		body = out
	}
	req.Body, req.fields = body, fields
	return req, nil
}

// decodeFields reads the top-level members of a JSON object body in one
// pass, as json.Unmarshal into a map[string]json.RawMessage would (keys
// decoded, the last of a repeated key winning), except that each value
// aliases body instead of being copied.
func decodeFields(body []byte) (map[string]json.RawMessage, bool) {
	fields := make(map[string]json.RawMessage, 8)
	it := jsonscan.Members(body)
	for it.Next() {
		key, _ := jsonscan.String(it.Key()) // a scanned key always decodes
		fields[key] = it.Value()
	}
	return fields, it.Valid() && it.Found()
}

// generation is the fields check of chat and completions: the input
// named input is required, and max_completion_tokens or max_tokens
// bound the output.
func generation(input string) func(map[string]json.RawMessage, *apiRequest) *APIError {
	return func(fields map[string]json.RawMessage, req *apiRequest) *APIError {
		if e := decodeLimits(fields, req, "max_completion_tokens", "max_tokens"); e != nil {
			return e
		}
		return inputs(nil, input)(fields, req)
	}
}

// inputs requires every field in required and estimates the prompt from
// them and from the optional fields present.
func inputs(optional []string, required ...string) func(map[string]json.RawMessage, *apiRequest) *APIError {
	return func(fields map[string]json.RawMessage, req *apiRequest) *APIError {
		for _, name := range required {
			raw, ok := fields[name]
			if !ok || isNull(raw) {
				return errInvalidRequest("Missing required parameter: '"+name+"'.", name)
			}
			req.PromptTokens += estimateTokens(raw)
		}
		for _, name := range optional {
			if raw, ok := fields[name]; ok && !isNull(raw) {
				req.PromptTokens += estimateTokens(raw)
			}
		}
		return nil
	}
}

// oneOf requires at least one of names and estimates the prompt from
// those present.
func oneOf(names ...string) func(map[string]json.RawMessage, *apiRequest) *APIError {
	return func(fields map[string]json.RawMessage, req *apiRequest) *APIError {
		if e := inputs(names)(fields, req); e != nil {
			return e
		}
		if req.PromptTokens == 0 {
			return errInvalidRequest("Missing required parameter: one of '"+strings.Join(names, "', '")+"'.", names[0])
		}
		return nil
	}
}

// usageOption is what a streamed body without stream_options gets:
// spliced in before its closing brace, so the client's bytes are
// forwarded as they came and not re-encoded.
var usageOption = []byte(`,"stream_options":{"include_usage":true}`)

// bodyWithUsage returns the body to forward for a streamed request: one
// that asks the upstream for the usage chunk. A body that already asks
// for it is forwarded as is; one without stream_options gets it spliced
// in; any other is re-encoded from fields with include_usage set.
func bodyWithUsage(body []byte, fields map[string]json.RawMessage, req *apiRequest) ([]byte, *APIError) {
	if _, ok := fields["stream_options"]; !ok {
		// body parsed as a non-empty object (it has a model): its last
		// non-space byte is the closing brace.
		end := len(bytes.TrimRight(body, " \t\r\n"))
		out := make([]byte, 0, len(body)+len(usageOption))
		out = append(append(append(out, body[:end-1]...), usageOption...), body[end-1:]...)
		return out, nil
	}
	if e := forceUsage(fields, req); e != nil {
		return nil, e
	}
	if req.WantsUsage {
		return body, nil
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, errInvalidRequest("The request body could not be re-encoded.", "")
	}
	return out, nil
}

func decodeModel(fields map[string]json.RawMessage, req *apiRequest) *APIError {
	raw, ok := fields["model"]
	if !ok || isNull(raw) {
		return errInvalidRequest("Missing required parameter: 'model'.", "model")
	}
	model, ok := jsonscan.String(raw)
	if !ok {
		return errInvalidRequest("Invalid value for 'model': expected a non-empty string.", "model")
	}
	req.Model = model
	return checkModel(model)
}

// checkModel bounds a model name, which ends up in queue names, metric
// labels and logs.
func checkModel(model string) *APIError {
	if model == "" {
		return errInvalidRequest("Invalid value for 'model': expected a non-empty string.", "model")
	}
	if len(model) > maxModelNameBytes || !utf8.ValidString(model) || hasControl(model) {
		return errInvalidRequest("Invalid value for 'model': not a valid model name.", "model")
	}
	return nil
}

// decodeLimits reads the output limit from the first of names set (for
// chat, max_completion_tokens wins over max_tokens, as in vLLM).
func decodeLimits(fields map[string]json.RawMessage, req *apiRequest, names ...string) *APIError {
	for _, name := range names {
		var n int64
		set, e := decodeOptional(fields, name, &n)
		switch {
		case e != nil:
			return e
		case !set:
			continue
		case n < 1:
			return errInvalidRequest("Invalid value for '"+name+"': must be at least 1.", name)
		}
		if req.MaxTokens == 0 {
			req.MaxTokens = n
		}
	}
	return nil
}

// forceUsage sets stream_options.include_usage=true for the upstream and
// remembers whether the client asked for it.
func forceUsage(fields map[string]json.RawMessage, req *apiRequest) *APIError {
	opts := map[string]json.RawMessage{}
	if raw, ok := fields["stream_options"]; ok && !isNull(raw) {
		if opts, ok = decodeFields(raw); !ok {
			return errInvalidRequest("Invalid value for 'stream_options': expected an object.", "stream_options")
		}
		var include bool
		if _, e := decodeOptional(opts, "include_usage", &include); e != nil {
			e.Param = "stream_options.include_usage"
			return e
		}
		req.WantsUsage = include
	}
	opts["include_usage"] = json.RawMessage("true")
	raw, _ := json.Marshal(opts) // a map of raw messages always encodes
	fields["stream_options"] = raw
	return nil
}

// decodeOptional decodes fields[name] into dst when present and not
// null, and reports whether it was.
func decodeOptional[T bool | int64 | string](fields map[string]json.RawMessage, name string, dst *T) (bool, *APIError) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return false, nil
	}
	if !decodeScalar(raw, dst) {
		return false, errInvalidRequest("Invalid type for '"+name+"'.", name)
	}
	return true, nil
}

// decodeScalar is json.Unmarshal of one scanned JSON value into a bool,
// an int64 or a string, without its reflection: for a valid token
// encoding/json decides the same way (it parses an int64 with
// strconv.ParseInt, and only true and false are booleans).
func decodeScalar[T bool | int64 | string](raw []byte, dst *T) bool {
	switch d := any(dst).(type) {
	case *bool:
		switch string(raw) {
		case "true", "false":
			*d = raw[0] == 't'
			return true
		}
	case *int64:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		*d = n
		return err == nil
	case *string:
		text, ok := jsonscan.String(raw)
		*d = text
		return ok
	}
	return false
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// estimateTokens is a cheap upper-leaning estimate of the prompt's tokens
// (about four bytes of JSON text per token) used only for the TPM
// reservation; the real count replaces it when the usage arrives.
func estimateTokens(input json.RawMessage) int64 {
	return int64(len(input))/4 + 1
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "nothing"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
