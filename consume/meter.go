package consume

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// DefaultCompletionWeight is w in a bucket's service, prompt tokens plus
// w × completion tokens: generating a token costs the GPU more than
// reading one.
const DefaultCompletionWeight = 2

// meter charges one running request's service to its bucket as the
// response streams: each data event counts as one completion token until
// the upstream reports usage, which then sets the exact totals. Only the
// request's invocation goroutine uses it.
type meter struct {
	sched *fairshare.Scheduler
	k     policy.Key
	w     float64
	// charged is the service charged so far; prompt is its prompt part.
	charged, prompt float64
	exact           bool // usage was reported: chunks no longer count
}

func newMeter(s *fairshare.Scheduler, k policy.Key, w float64, prompt float64) *meter {
	return &meter{sched: s, k: k, w: w, charged: prompt, prompt: prompt}
}

// observe charges what ev shows of the response.
func (m *meter) observe(ev Event) {
	switch ev.Kind {
	case EventChunk, EventBody:
		if u, ok := ParseUsage(ev.Data); ok {
			m.settle(u)
			return
		}
		if ev.Kind == EventChunk && !m.exact {
			m.add(m.w)
		}
	}
}

// settle charges the difference to the reported usage. Usage reported on
// every chunk (continuous usage stats) is cumulative, so settling again
// just tops up.
func (m *meter) settle(u Usage) {
	m.exact = true
	m.add(float64(u.PromptTokens) + m.w*float64(u.CompletionTokens) - m.charged)
}

func (m *meter) add(v float64) {
	if v == 0 {
		return
	}
	m.charged += v
	m.sched.Charge(m.k, v, time.Now())
}

// Usage is what an upstream reports a request consumed.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	// Only is true for a streamed chunk that carries usage and no choices
	// (the chunk include_usage adds at the end of a stream).
	Only bool
}

var usageKey = []byte(`"usage"`)

// ParseUsage reads the usage of a streamed chunk or a response body.
// Data without a "usage" key is not decoded, so the common chunk costs
// one substring search.
func ParseUsage(data []byte) (Usage, bool) {
	if !bytes.Contains(data, usageKey) {
		return Usage{}, false
	}
	var f struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   *struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
			Total      int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &f) != nil || f.Usage == nil {
		return Usage{}, false
	}
	u := Usage{PromptTokens: f.Usage.Prompt, CompletionTokens: f.Usage.Completion, TotalTokens: f.Usage.Total, Only: len(f.Choices) == 0}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, true
}
