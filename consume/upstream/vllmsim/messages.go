package vllmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

type messagesRequest struct {
	Model     string            `json:"model"`
	Messages  []json.RawMessage `json:"messages"`
	System    json.RawMessage   `json:"system"`
	Tools     json.RawMessage   `json:"tools"`
	MaxTokens *int              `json:"max_tokens"`
	Stream    *bool             `json:"stream"`
}

// messagesOut renders the Anthropic Messages API.
type messagesOut struct{ j *job }

// messages serves POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	j, e := s.parseMessages(r, false)
	if e != nil {
		writeAnthropicError(w, e)
		return
	}
	s.run(w, r, j)
}

// countMessageTokens serves POST /v1/messages/count_tokens.
func (s *Server) countMessageTokens(w http.ResponseWriter, r *http.Request) {
	j, e := s.parseMessages(r, true)
	if e != nil {
		writeAnthropicError(w, e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"input_tokens":%d}`, j.promptTokens)
}

// parseMessages validates a Messages request (count: a count_tokens one,
// which has no max_tokens).
func (s *Server) parseMessages(r *http.Request, count bool) (*job, *apiError) {
	var req messagesRequest
	body, e := readJSON(r, &req)
	if e != nil {
		return nil, e
	}
	if req.Model == "" {
		return nil, badRequest("Model is required", ptr("body.model"))
	}
	j, e := s.newJob(r, req.Model, body)
	if e != nil {
		return nil, e
	}
	j.respID = "msg_" + j.id
	j.out = messagesOut{j}
	j.stream = req.Stream != nil && *req.Stream
	if j.promptTokens, e = messageWords(req.Messages); e != nil {
		return nil, e
	}
	j.promptTokens += systemWords(req.System)
	if count {
		return j, nil
	}
	if req.MaxTokens == nil {
		return nil, badRequest("Field required: max_tokens.", ptr("body.max_tokens"))
	}
	if *req.MaxTokens <= 0 {
		return nil, badRequest("max_tokens must be positive", ptr("body.max_tokens"))
	}
	j.maxTokens = *req.MaxTokens
	if total := j.promptTokens + j.maxTokens; total > s.cfg.MaxModelLen {
		return nil, badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.MaxModelLen, total, j.promptTokens, j.maxTokens), nil)
	}
	s.keyPrompt(j, func(h *blockHasher) {
		h.system(req.System)
		h.raw(itemTools, req.Tools)
		h.messages(req.Messages)
	})
	return j, nil
}

// systemWords counts a system prompt: a string or text blocks.
func systemWords(raw json.RawMessage) int {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return len(strings.Fields(text))
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks) // anything else counts nothing
	n := 0
	for _, b := range blocks {
		n += len(strings.Fields(b.Text))
	}
	return n
}

// anthropicErrorType is Anthropic's error type for an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
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
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func writeAnthropicError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%s,"message":%s}}`, quote(anthropicErrorType(e.status)), quote(e.msg))
}

// usage is Anthropic's usage object. With the prefix cache on, it counts
// cached prompt tokens apart, as Anthropic does: input_tokens +
// cache_read_input_tokens is the prompt.
func (o messagesOut) usage(output int) string {
	if !o.j.cacheable {
		return `{"input_tokens":` + strconv.Itoa(o.j.promptTokens) + `,"output_tokens":` + strconv.Itoa(output) + `}`
	}
	return `{"input_tokens":` + strconv.Itoa(o.j.promptTokens-o.j.cachedTokens) + `,"cache_read_input_tokens":` +
		strconv.Itoa(o.j.cachedTokens) + `,"output_tokens":` + strconv.Itoa(output) + `}`
}

func (o messagesOut) head() []frame {
	start := `{"type":"message_start","message":{"id":` + quote(o.j.respID) + `,"type":"message","role":"assistant","content":[],"model":` +
		o.j.model + `,"stop_reason":null,"stop_sequence":null,"usage":` + o.usage(0) + `}}`
	return []frame{
		{event: "message_start", data: []byte(start)},
		{event: "content_block_start", data: []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
		{event: "ping", data: []byte(`{"type":"ping"}`)},
	}
}

func (o messagesOut) token(i int) []frame {
	d := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + quote(tokenText(i, o.j.maxTokens)) + `}}`
	return []frame{{event: "content_block_delta", data: []byte(d)}}
}

func (o messagesOut) tail() []frame {
	delta := `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":` + o.usage(o.j.maxTokens) + `}`
	return []frame{
		{event: "content_block_stop", data: []byte(`{"type":"content_block_stop","index":0}`)},
		{event: "message_delta", data: []byte(delta)},
		{event: "message_stop", data: []byte(`{"type":"message_stop"}`), terminal: true},
	}
}

func (o messagesOut) full() []byte {
	return []byte(`{"id":` + quote(o.j.respID) + `,"type":"message","role":"assistant","content":[{"type":"text","text":` +
		quote(completionText(o.j.maxTokens)) + `}],"model":` + o.j.model + `,"stop_reason":"max_tokens","stop_sequence":null,"usage":` +
		o.usage(o.j.maxTokens) + `}`)
}

func (o messagesOut) writeError(w http.ResponseWriter, e *apiError) { writeAnthropicError(w, e) }
