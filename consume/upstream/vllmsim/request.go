package vllmsim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
)

// maxRequestBytes bounds a request body.
const maxRequestBytes = 16 << 20

// job is a validated generation request.
type job struct {
	chat         bool
	id           string // request id
	respID       string // chatcmpl-<id> or cmpl-<id>, JSON-quoted
	model        string // JSON-quoted
	created      int64
	promptTokens int
	maxTokens    int
	stream       bool
	includeUsage bool
	body         []byte // the raw request, which Config.Faults rules match
	out          renderer
	instant      bool   // takes no running slot, no time and no prefill (tokenize)
	contentType  string // of a non-streamed body; empty: application/json

	// The prefix cache's view of the prompt (set only when it is on).
	cacheable    bool     // a generation request: its prompt is looked up and counted
	blocks       []uint64 // chained hashes of the prompt's leading full blocks
	cachedTokens int      // prompt tokens found in the cache when it started running
}

type wireRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	Prompt              json.RawMessage   `json:"prompt"`
	Tools               json.RawMessage   `json:"tools"`
	Stream              *bool             `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
}

type streamOptions struct {
	IncludeUsage *bool `json:"include_usage"`
}

// parse validates r in vLLM's order: content type, JSON, model, fields.
func (s *Server) parse(r *http.Request, chat bool) (*job, *apiError) {
	var req wireRequest
	body, e := readJSON(r, &req)
	if e != nil {
		return nil, e
	}
	j, e := s.newJob(r, req.Model, body)
	if e != nil {
		return nil, e
	}
	j.chat = chat
	j.stream = req.Stream != nil && *req.Stream
	if req.StreamOptions != nil {
		if !j.stream {
			return nil, badRequest("Stream options can only be defined when `stream=True`.", ptr("stream_options"))
		}
		j.includeUsage = req.StreamOptions.IncludeUsage == nil || *req.StreamOptions.IncludeUsage
	}
	if e := s.countTokens(j, &req); e != nil {
		return nil, e
	}
	s.keyPrompt(j, func(h *blockHasher) {
		if chat {
			h.raw(itemTools, req.Tools)
			h.messages(req.Messages)
		} else {
			h.prompt(req.Prompt)
		}
	})
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	j.respID = quote(prefix + j.id)
	return j, nil
}

// readBody checks the content type and reads the body.
// readJSON reads r's JSON body into req, with vLLM's errors for a wrong
// content type and for invalid JSON, and returns the raw body.
func readJSON[T any](r *http.Request, req *T) ([]byte, *apiError) {
	body, e := readBody(r)
	if e != nil {
		return nil, e
	}
	if err := json.Unmarshal(body, req); err != nil {
		return nil, badRequest("Invalid JSON: "+err.Error(), nil)
	}
	return body, nil
}

func readBody(r *http.Request) ([]byte, *apiError) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, badRequest("Unsupported Media Type: Only 'application/json' is allowed", nil)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxRequestBytes))
	if err != nil {
		return nil, badRequest("Could not read the request body: "+err.Error(), nil)
	}
	return body, nil
}

// newJob starts a job for model (empty: the first served model), with
// the request id from X-Request-Id or a random one.
func (s *Server) newJob(r *http.Request, model string, body []byte) (*job, *apiError) {
	if model == "" {
		model = s.cfg.Models[0]
	} else if !slices.Contains(s.cfg.Models, model) {
		return nil, &apiError{status: http.StatusNotFound, typ: "NotFoundError", param: "model",
			msg: fmt.Sprintf("The model `%s` does not exist.", model)}
	}
	j := &job{model: quote(model), created: time.Now().Unix(), body: body}
	j.id = r.Header.Get("X-Request-Id")
	if j.id == "" {
		j.id = randomID()
	}
	return j, nil
}

// countTokens sets promptTokens and maxTokens and checks the limits.
func (s *Server) countTokens(j *job, req *wireRequest) *apiError {
	var err *apiError
	if j.chat {
		j.promptTokens, err = messageWords(req.Messages)
	} else {
		j.promptTokens, err = promptWords(req.Prompt)
	}
	if err != nil {
		return err
	}
	maxTok, name := req.MaxTokens, "max_tokens"
	if j.chat && req.MaxCompletionTokens != nil {
		maxTok, name = req.MaxCompletionTokens, "max_completion_tokens"
	}
	j.maxTokens = s.cfg.DefaultMaxTokens
	if maxTok != nil {
		if *maxTok < 1 {
			return badRequest(fmt.Sprintf("%s must be at least 1, got %d.", name, *maxTok), &name)
		}
		j.maxTokens = *maxTok
	}
	if total := j.promptTokens + j.maxTokens; total > s.cfg.MaxModelLen {
		return badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.MaxModelLen, total, j.promptTokens, j.maxTokens), nil)
	}
	return nil
}

// messageWords counts the words of every message's content: a string or
// a list of parts whose "text" fields count.
func messageWords(msgs []json.RawMessage) (int, *apiError) {
	if len(msgs) == 0 {
		return 0, badRequest("Field required: messages must be a non-empty list.", ptr("body.messages"))
	}
	n := 0
	for _, raw := range msgs {
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return 0, badRequest("Invalid message: "+err.Error(), ptr("body.messages"))
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			n += len(strings.Fields(text))
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if len(m.Content) > 0 && json.Unmarshal(m.Content, &parts) != nil {
			return 0, badRequest("Invalid message content.", ptr("body.messages"))
		}
		for _, p := range parts {
			n += len(strings.Fields(p.Text))
		}
	}
	return n, nil
}

// promptWords counts a completion prompt: a string, a list of strings, a
// list of token ids or a list of such lists.
func promptWords(raw json.RawMessage) (int, *apiError) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return len(strings.Fields(one)), nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		n := 0
		for _, p := range many {
			n += len(strings.Fields(p))
		}
		return n, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return len(ids), nil
	}
	var idLists [][]int
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) > 0 {
		n := 0
		for _, l := range idLists {
			n += len(l)
		}
		return n, nil
	}
	return 0, badRequest("Field required: prompt must be a string, a list of strings or token ids.", ptr("body.prompt"))
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func ptr[T any](v T) *T { return &v }
