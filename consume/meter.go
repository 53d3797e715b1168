package consume

import (
	"bytes"
	"encoding/json"
	"math"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// DefaultCompletionWeight is w in a bucket's service, prompt tokens plus
// w × completion tokens: generating a token costs the GPU more than
// reading one.
const DefaultCompletionWeight = 2

// meter charges one running request's service to its bucket. The service
// it is expected to take (prompt plus w × expected completion) is charged
// when it starts: a slot is held for a whole request, so a bucket that
// starts long generations must pay for them before the next slot is
// handed out, not only while they run. As the response streams, each data
// event counts as one completion token; tokens beyond the expectation are
// charged as they come. Reported usage sets the exact totals, and at the
// end whatever was charged and not generated is given back, so a stream
// cut short is charged what it produced. Only the request's invocation
// goroutine uses it.
type meter struct {
	sched   *fairshare.Scheduler
	k       policy.Key
	prompt  float64 // the start's estimate of the prompt's tokens
	charged float64 // the service charged so far

	// What a stream's every chunk touches, together after the tally's
	// count (its last field): see invocation. expected is the start's
	// estimate of the completion; streamed counts data events; owed is
	// what the tokens beyond the expectation add and is not charged yet
	// (see chargeBatch); w weighs a completion token.
	tally                    Tally
	settled                  bool // final usage seen: the totals are exact
	streamed, expected, owed float64
	w                        float64
}

// start charges the request's expected service to m, a new meter. The
// expected completion is its max_tokens (or the gateway's default
// reservation), or the bucket's recent mean when that is smaller: a bucket whose requests ask for 4,096 tokens and stop at 100
// is not charged 4,096 before each starts, and one that does generate
// them is charged as they stream.
func (m *meter) start(s *fairshare.Scheduler, k policy.Key, w float64, req *Request, emptied bool, now time.Time) {
	*m = meter{sched: s, k: k, w: w, prompt: float64(req.PromptTokens), tally: Tally{Shape: req.Shape}}
	asked := float64(req.CompletionTokens)
	s.StartCosting(k, emptied, func(mean float64, ok bool) float64 {
		m.expected = asked
		if ok {
			m.expected = min(asked, math.Ceil(mean))
		}
		m.charged = m.prompt + w*m.expected
		return m.charged
	}, now)
}

// observe charges what ev shows of the response. Which streamed events
// are generated tokens, and where usage is reported, depends on the
// request's Shape: every data event but the usage chunk on chat, only
// response.output_text.delta on Responses, content_block_delta on
// Messages.
func (m *meter) observe(ev Event) {
	if m.settled {
		return
	}
	switch ev.Kind {
	case EventBody:
		if _, reported := m.tally.Observe(&ev); reported {
			m.usage(m.tally.Usage, true)
		}
	case EventChunk:
		token, reported := m.tally.Observe(&ev)
		if reported {
			m.usage(m.tally.Usage, m.tally.Final)
			return
		}
		if token {
			m.streamed++
			if m.streamed > m.expected {
				m.owe(m.w)
			}
		}
	}
}

// usage charges reported usage. Final usage (a body, or the usage-only
// chunk that ends a stream) sets the totals; usage on every chunk
// (continuous usage stats) is cumulative and only tops up past the
// expectation until then.
func (m *meter) usage(u Usage, final bool) {
	m.streamed = float64(u.CompletionTokens)
	if final {
		m.settled = true
		m.add(float64(u.PromptTokens) + m.w*float64(u.CompletionTokens) - m.charged)
		return
	}
	m.add(max(m.prompt+m.w*max(m.streamed, m.expected)-m.charged, 0))
}

// end gives back what was charged and not generated when no final usage
// came (the stream broke off, or the client left), and records what the
// request generated in the bucket's recent mean.
func (m *meter) end() {
	if !m.settled {
		m.add(m.prompt + m.w*m.streamed - m.charged)
	}
	m.sched.Completed(m.k, m.streamed)
}

// chargeBatch is how many tokens beyond the expectation a stream
// charges at a time: one charge per token would take the scheduler's
// lock once per chunk of every stream.
const chargeBatch = 16

// owe adds v to what the stream owes, and charges it once it reaches a
// batch.
func (m *meter) owe(v float64) {
	m.owed += v
	if m.owed >= chargeBatch*m.w {
		m.add(m.owed)
	}
}

// add charges v now, with whatever the stream owed; the owed part is in
// v when the caller computed v from charged.
func (m *meter) add(v float64) {
	m.owed = 0
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
	// CachedTokens is the part of PromptTokens the server found in its
	// prefix cache, when it said (Cached): prompt_tokens_details or
	// input_tokens_details .cached_tokens, or Anthropic's
	// cache_read_input_tokens.
	CachedTokens int64
	Cached       bool
}

// cachedDetails is the OpenAI spelling of cached prompt tokens.
type cachedDetails struct {
	CachedTokens *int64 `json:"cached_tokens"`
}

// cached sets u's cached tokens from whichever spelling is present.
func (u *Usage) cached(details ...*cachedDetails) {
	for _, d := range details {
		if d != nil && d.CachedTokens != nil {
			u.CachedTokens, u.Cached = *d.CachedTokens, true
			return
		}
	}
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
		Usage   *chunkUsage       `json:"usage"`
	}
	if json.Unmarshal(data, &f) != nil || f.Usage == nil {
		return Usage{}, false
	}
	return f.Usage.normal(len(f.Choices) == 0), true
}

// chunkUsage is the usage member of an OpenAI chunk or body, as
// ParseUsage reads it.
type chunkUsage struct {
	Prompt     int64          `json:"prompt_tokens"`
	Completion int64          `json:"completion_tokens"`
	Total      int64          `json:"total_tokens"`
	Details    *cachedDetails `json:"prompt_tokens_details"`
}

// normal is w as a Usage; only says the chunk had no choices.
func (w *chunkUsage) normal(only bool) Usage {
	u := Usage{PromptTokens: w.Prompt, CompletionTokens: w.Completion, TotalTokens: w.Total, Only: only}
	u.cached(w.Details)
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}
