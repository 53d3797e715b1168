package vllmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// responsesRequest is the part of a POST /v1/responses body the
// simulator reads; other fields are accepted and ignored.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Stream             *bool           `json:"stream"`
	Store              *bool           `json:"store"`
	Background         *bool           `json:"background"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Metadata           json.RawMessage `json:"metadata"`
}

// responsesOut renders a Responses API response and its named events.
type responsesOut struct {
	s          *Server
	j          *job
	req        responsesRequest
	history    int   // input tokens that are not instructions, for a follow-up
	prev       *turn // the previous response's conversation (prefix cache on)
	store      bool
	background bool
	seq        int // next sequence_number
}

// responses serves POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	o, e := s.parseResponses(r)
	if e != nil {
		e.write(w)
		return
	}
	if o.background {
		s.startBackground(w, r, o)
		return
	}
	s.run(w, r, o.j)
}

func (s *Server) parseResponses(r *http.Request) (*responsesOut, *apiError) {
	var req responsesRequest
	body, e := readJSON(r, &req)
	if e != nil {
		return nil, e
	}
	j, e := s.newJob(r, req.Model, body)
	if e != nil {
		return nil, e
	}
	o := &responsesOut{s: s, j: j, req: req, store: req.Store == nil || *req.Store}
	j.out = o
	j.stream = req.Stream != nil && *req.Stream
	j.respID = "resp_" + j.id
	if o.background = req.Background != nil && *req.Background; o.background {
		if !o.store {
			return nil, badRequest("background can only be used when `store` is true", nil)
		}
		if j.stream {
			return nil, badRequest("The simulator does not stream background responses.", ptr("stream"))
		}
	}
	n, e := inputWords(req.Input)
	if e != nil {
		return nil, e
	}
	if req.PreviousResponseID != nil {
		prev, ok := s.store.get(*req.PreviousResponseID)
		if !ok {
			return nil, responseNotFound(*req.PreviousResponseID)
		}
		n += prev.history
		o.prev = prev.turn
	}
	o.history = n
	if req.Instructions != nil {
		n += len(strings.Fields(*req.Instructions))
	}
	j.promptTokens = n
	j.maxTokens = s.cfg.DefaultMaxTokens
	if m := req.MaxOutputTokens; m != nil {
		if *m < 1 {
			return nil, badRequest(fmt.Sprintf("max_output_tokens must be at least 1, got %d.", *m), ptr("max_output_tokens"))
		}
		j.maxTokens = *m
	}
	if total := j.promptTokens + j.maxTokens; total > s.cfg.MaxModelLen {
		return nil, badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.MaxModelLen, total, j.promptTokens, j.maxTokens), nil)
	}
	s.keyPrompt(j, o.render)
	return o, nil
}

// render lays out a Responses prompt for the prefix cache: the
// instructions, the previous turns (each input, then its output), then
// the input.
func (o *responsesOut) render(h *blockHasher) {
	if o.req.Instructions != nil {
		h.item(itemRole, "instructions")
		h.text(*o.req.Instructions)
	}
	var turns []*turn
	for t := o.prev; t != nil; t = t.prev {
		turns = append(turns, t)
	}
	for i := len(turns) - 1; i >= 0 && !h.full(); i-- {
		h.input(turns[i].input)
		h.item(itemRole, "assistant")
		h.generated(turns[i].output)
	}
	h.input(o.req.Input)
}

// inputWords counts a Responses input: a string, or a list of items whose
// "content" (a string or parts with "text") counts.
func inputWords(raw json.RawMessage) (int, *apiError) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return len(strings.Fields(text)), nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return 0, badRequest("Field required: input must be a string or a non-empty list of items.", ptr("body.input"))
	}
	n, e := messageWords(items)
	if e != nil {
		e.param = "body.input"
	}
	return n, e
}

func responseNotFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error",
		msg: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// Wire shapes, in vLLM's field order (ResponsesResponse).

type responseObject struct {
	ID                 string          `json:"id"`
	CreatedAt          int64           `json:"created_at"`
	IncompleteDetails  json.RawMessage `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	Metadata           json.RawMessage `json:"metadata"`
	Model              string          `json:"model"`
	Object             string          `json:"object"`
	Output             []outputMessage `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	Temperature        json.RawMessage `json:"temperature"`
	ToolChoice         string          `json:"tool_choice"`
	Tools              []struct{}      `json:"tools"`
	TopP               json.RawMessage `json:"top_p"`
	Background         bool            `json:"background"`
	MaxOutputTokens    int             `json:"max_output_tokens"`
	MaxToolCalls       json.RawMessage `json:"max_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Prompt             json.RawMessage `json:"prompt"`
	Reasoning          json.RawMessage `json:"reasoning"`
	ServiceTier        string          `json:"service_tier"`
	Status             string          `json:"status"`
	Text               json.RawMessage `json:"text"`
	TopLogprobs        json.RawMessage `json:"top_logprobs"`
	Truncation         string          `json:"truncation"`
	Usage              *responseUsage  `json:"usage"`
	User               json.RawMessage `json:"user"`
}

type outputMessage struct {
	ID      string       `json:"id"`
	Content []outputText `json:"content"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Type    string       `json:"type"`
}

type outputText struct {
	Annotations []struct{} `json:"annotations"`
	Text        string     `json:"text"`
	Type        string     `json:"type"`
	Logprobs    []struct{} `json:"logprobs"`
}

type responseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  cachedTokens   `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails reasoningCount `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

type cachedTokens struct {
	CachedTokens int `json:"cached_tokens"`
}

type reasoningCount struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// responseEvent is every streamed event; each kind leaves the fields it
// does not carry empty, so they are omitted.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *responseObject `json:"response,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	Item           *outputMessage  `json:"item,omitempty"`
	Part           *outputText     `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Logprobs       *[]struct{}     `json:"logprobs,omitempty"`
}

// zero and noLogprobs are the constant fields of streamed events.
var (
	zero       = new(int)
	noLogprobs = &[]struct{}{}
)

// object is the response in the given status; a completed one has its
// output and usage.
func (o *responsesOut) object(status string) *responseObject {
	j := o.j
	r := &responseObject{
		ID: j.respID, CreatedAt: j.created, Instructions: o.req.Instructions,
		Metadata: o.req.Metadata, Model: unquote(j.model), Object: "response",
		Output: []outputMessage{}, ParallelToolCalls: true, Temperature: json.RawMessage("1.0"),
		ToolChoice: "auto", Tools: []struct{}{}, TopP: json.RawMessage("1.0"), Background: o.background,
		MaxOutputTokens: j.maxTokens, PreviousResponseID: o.req.PreviousResponseID,
		ServiceTier: "auto", Status: status, Truncation: "disabled",
	}
	if status == "completed" {
		r.Output = []outputMessage{o.message("completed", completionText(j.maxTokens))}
		r.Usage = &responseUsage{InputTokens: j.promptTokens, InputTokensDetails: cachedTokens{j.cachedTokens},
			OutputTokens: j.maxTokens, TotalTokens: j.promptTokens + j.maxTokens}
	}
	return r
}

func (o *responsesOut) message(status, text string) outputMessage {
	m := outputMessage{ID: "msg_" + o.j.id, Content: []outputText{}, Role: "assistant", Status: status, Type: "message"}
	if status == "completed" {
		m.Content = append(m.Content, textPart(text))
	}
	return m
}

func textPart(text string) outputText {
	return outputText{Annotations: []struct{}{}, Text: text, Type: "output_text", Logprobs: []struct{}{}}
}

func (o *responsesOut) event(ev responseEvent) frame {
	ev.SequenceNumber = o.seq
	o.seq++
	data, _ := json.Marshal(ev) // plain structs always marshal
	return frame{event: ev.Type, data: data, terminal: ev.Type == "response.completed"}
}

func (o *responsesOut) head() []frame {
	item := o.message("in_progress", "")
	part := textPart("")
	return []frame{
		o.event(responseEvent{Type: "response.created", Response: o.object("in_progress")}),
		o.event(responseEvent{Type: "response.in_progress", Response: o.object("in_progress")}),
		o.event(responseEvent{Type: "response.output_item.added", OutputIndex: zero, Item: &item}),
		o.event(responseEvent{Type: "response.content_part.added", ItemID: item.ID, OutputIndex: zero, ContentIndex: zero, Part: &part}),
	}
}

func (o *responsesOut) token(i int) []frame {
	d := tokenText(i, o.j.maxTokens)
	return []frame{o.event(responseEvent{Type: "response.output_text.delta", ItemID: "msg_" + o.j.id,
		OutputIndex: zero, ContentIndex: zero, Delta: &d, Logprobs: noLogprobs})}
}

func (o *responsesOut) tail() []frame {
	text := completionText(o.j.maxTokens)
	item := o.message("completed", text)
	part := textPart(text)
	return []frame{
		o.event(responseEvent{Type: "response.output_text.done", ItemID: item.ID, OutputIndex: zero,
			ContentIndex: zero, Text: &text, Logprobs: noLogprobs}),
		o.event(responseEvent{Type: "response.content_part.done", ItemID: item.ID, OutputIndex: zero, ContentIndex: zero, Part: &part}),
		o.event(responseEvent{Type: "response.output_item.done", OutputIndex: zero, Item: &item}),
		o.event(responseEvent{Type: "response.completed", Response: o.object("completed")}),
	}
}

func (o *responsesOut) full() []byte { return o.objectJSON("completed") }

func (o *responsesOut) objectJSON(status string) []byte {
	b, _ := json.Marshal(o.object(status)) // plain structs always marshal
	return b
}

func (o *responsesOut) writeError(w http.ResponseWriter, e *apiError) { e.write(w) }

// finished implements [finisher]: a response with store keeps its final
// form for GET and previous_response_id.
func (o *responsesOut) finished() {
	if o.store {
		o.s.store.put(o.j.respID, o.stored())
	}
}

// stored is the finished response as the store keeps it.
func (o *responsesOut) stored() storedResponse {
	return storedResponse{body: o.full(), history: o.history + o.j.maxTokens, turn: o.turn(o.j.maxTokens)}
}

// turn is this response's conversation for a follow-up's prefix-cache
// key, after output tokens; nil when the cache is off.
func (o *responsesOut) turn(output int) *turn {
	if o.s.cache == nil {
		return nil
	}
	return &turn{prev: o.prev, input: o.req.Input, output: output}
}

// completionText is the whole completion of n tokens.
func completionText(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(tokenText(i, n))
	}
	return b.String()
}

func unquote(s string) string {
	var v string
	_ = json.Unmarshal([]byte(s), &v) // s was made by quote
	return v
}
