package consume

import (
	"bytes"
	"encoding/json"

	"github.com/pacegate/pacegate/consume/jsonscan"
)

// Shape is the wire shape of one API family's responses: how it reports
// usage, which streamed events are generated tokens, and which event ends
// a stream. The zero value is the OpenAI shape of chat and completions.
type Shape uint8

const (
	// ShapeOpenAI: "data:" events ending with "data: [DONE]"; usage as
	// prompt_tokens/completion_tokens/total_tokens, in the body or in the
	// usage-only chunk. Chat, completions, embeddings, rerank, score,
	// tokenize, audio.
	ShapeOpenAI Shape = iota
	// ShapeResponses: the Responses API. Named events
	// (response.created ... response.completed), no [DONE]; usage as
	// input_tokens/output_tokens on the final response object.
	ShapeResponses
	// ShapeAnthropic: the Anthropic Messages API. Named events
	// (message_start ... message_stop, ping), no [DONE]; input_tokens on
	// message_start, cumulative output_tokens on message_delta.
	ShapeAnthropic
)

// Named reports whether the shape's stream events carry an "event:" name
// that must reach the client.
func (s Shape) Named() bool { return s != ShapeOpenAI }

// Ends reports whether a streamed event is the last of a stream of this
// shape. For ShapeOpenAI it is the [DONE] marker, which is not a JSON
// event and is not relayed as one; for the named shapes it is a real
// event, relayed before the stream ends.
func (s Shape) Ends(name string, data []byte) bool {
	switch s {
	case ShapeResponses:
		switch name {
		case "response.completed", "response.failed", "response.incomplete", "error":
			return true
		}
		return false
	case ShapeAnthropic:
		return name == "message_stop" || name == "error"
	default:
		return string(data) == "[DONE]"
	}
}

// Tally reads the usage of one response in its shape. Set Shape and
// use the zero value otherwise. It is not safe for concurrent use: each
// reader of a response (the gateway's handler, the consumer's meter)
// keeps its own.
type Tally struct {
	Shape Shape
	// Usage is the latest usage reported; its totals are cumulative.
	Usage Usage
	// Known says some usage was reported, Final that the final one was:
	// the totals are then exact.
	Known, Final bool
	// Repeats, when set, keeps the stream's last chunk for Scan, so that
	// a chunk that repeats it but for its text is not scanned again (see
	// jsonscan.Repeat). The relay sets it for each stream.
	Repeats *jsonscan.Repeat
	// Streamed counts the generated-token events seen so far. Last: a
	// token chunk touches only it, and a holder puts what else the chunk
	// touches after it.
	Streamed int64
}

// Reading is what one streamed event or body says of its response's
// usage: read once, in the relay's pass over the bytes, and carried on
// the Event to every reader of the response (the consumer's meter, the
// gateway's account), which then count without parsing.
type Reading struct {
	// Read says the fields below were filled.
	Read bool
	// Token: the event is one generated token.
	Token bool
	// Reported: it carried usage. Usage and Final are then the totals
	// and finality after it, in the response's shape.
	Reported bool
	Final    bool
	Usage    Usage
}

// Read reads one event of the response (an EventChunk or EventBody's
// name and data) and returns what it says, with t's totals after it.
func (t *Tally) Read(kind EventKind, name string, data []byte) Reading {
	r := Reading{Read: true}
	switch kind {
	case EventChunk:
		r.Token, r.Reported = t.Chunk(name, data)
	case EventBody:
		r.Reported = t.Body(data)
	default:
		return r
	}
	if r.Reported {
		r.Usage, r.Final = t.Usage, t.Final
	}
	return r
}

// Observe counts ev into t: from its Reading when the relay read it,
// else from its bytes. It reports what Chunk reports.
func (t *Tally) Observe(ev *Event) (token, reported bool) {
	r := ev.Reading
	if !r.Read {
		r = t.Read(ev.Kind, ev.Name, ev.Data)
		return r.Token, r.Reported
	}
	if r.Token {
		t.Streamed++
	}
	if r.Reported {
		t.Usage, t.Known, t.Final = r.Usage, true, r.Final
	}
	return r.Token, r.Reported
}

// Chunk reads one streamed event (name is its "event:" field, empty for
// the OpenAI shape). token says the event is one generated token for the
// fair-share meter; reported that it carried usage, now in t.Usage.
func (t *Tally) Chunk(name string, data []byte) (token, reported bool) {
	switch t.Shape {
	case ShapeResponses:
		return t.responsesChunk(name, data)
	case ShapeAnthropic:
		return t.anthropicChunk(name, data)
	}
	u, ok := ParseUsage(data)
	if !ok {
		t.Streamed++
		return true, false
	}
	t.Usage, t.Known, t.Final = u, true, u.Only
	return false, true
}

// Body reads a non-streamed response body and reports whether it
// carried usage, which is then final.
func (t *Tally) Body(data []byte) bool {
	if !bytes.Contains(data, usageKey) {
		return false
	}
	var f struct {
		Usage *wireUsage `json:"usage"`
	}
	if json.Unmarshal(data, &f) != nil || f.Usage == nil {
		return false
	}
	t.Usage, t.Known, t.Final = f.Usage.normal(), true, true
	return true
}

func (t *Tally) responsesChunk(name string, data []byte) (token, reported bool) {
	switch name {
	case "response.output_text.delta", "response.reasoning_text.delta":
		t.Streamed++
		return true, false
	case "response.completed", "response.failed", "response.incomplete":
		var f struct {
			Response struct {
				Usage *wireUsage `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(data, &f) != nil || f.Response.Usage == nil {
			return false, false
		}
		t.Usage, t.Known, t.Final = f.Response.Usage.normal(), true, true
		return false, true
	}
	return false, false
}

func (t *Tally) anthropicChunk(name string, data []byte) (token, reported bool) {
	switch name {
	case "content_block_delta":
		t.Streamed++
		return true, false
	case "message_start":
		var f struct {
			Message struct {
				Usage *wireUsage `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(data, &f) != nil || f.Message.Usage == nil {
			return false, false
		}
		t.Usage, t.Known = f.Message.Usage.normal(), true
		return false, true
	case "message_delta":
		var f struct {
			Usage *wireUsage `json:"usage"`
		}
		if json.Unmarshal(data, &f) != nil || f.Usage == nil {
			return false, false
		}
		// output_tokens is cumulative; input_tokens comes again only in
		// newer servers, and then wins.
		u := f.Usage.normal()
		if f.Usage.Input == nil {
			u.PromptTokens = t.Usage.PromptTokens
		}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		if !u.Cached { // said on message_start only
			u.CachedTokens, u.Cached = t.Usage.CachedTokens, t.Usage.Cached
		}
		t.Usage, t.Known, t.Final = u, true, true
		return false, true
	}
	return false, false
}

// Charge is the tokens to charge for the response so far: the final
// usage when it came; otherwise what is known of the prompt (the
// reported count, else estimate) plus what was generated (the larger of
// the reported count and the streamed events). A stream cut short is
// charged what it produced.
func (t *Tally) Charge(promptEstimate int64) int64 {
	if t.Final {
		return t.Usage.TotalTokens
	}
	prompt := promptEstimate
	if t.Known && t.Usage.PromptTokens > 0 {
		prompt = t.Usage.PromptTokens
	}
	return prompt + max(t.Usage.CompletionTokens, t.Streamed)
}

// wireUsage is every usage spelling the APIs use: OpenAI's
// prompt/completion, the Responses and Anthropic input/output, and the
// total alone (rerank).
type wireUsage struct {
	Prompt     int64  `json:"prompt_tokens"`
	Completion int64  `json:"completion_tokens"`
	Total      int64  `json:"total_tokens"`
	Input      *int64 `json:"input_tokens"`
	Output     int64  `json:"output_tokens"`
	// Anthropic counts cached prompt tokens apart from input_tokens.
	CacheCreation int64  `json:"cache_creation_input_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
	// The OpenAI spellings of cached prompt tokens.
	PromptDetails *cachedDetails `json:"prompt_tokens_details"`
	InputDetails  *cachedDetails `json:"input_tokens_details"`
}

func (w *wireUsage) normal() Usage {
	u := Usage{PromptTokens: w.Prompt + w.CacheCreation, CompletionTokens: w.Completion + w.Output}
	if w.CacheRead != nil {
		u.PromptTokens += *w.CacheRead
		u.cached(&cachedDetails{CachedTokens: w.CacheRead})
	}
	u.cached(w.PromptDetails, w.InputDetails)
	if w.Input != nil {
		u.PromptTokens += *w.Input
	}
	u.TotalTokens = w.Total
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	if u.PromptTokens == 0 && u.CompletionTokens == 0 {
		u.PromptTokens = u.TotalTokens // only a total (rerank): all of it is input
	}
	return u
}
