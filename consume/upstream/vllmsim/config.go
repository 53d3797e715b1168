package vllmsim

import (
	"math"
	"time"
)

// Config sets up a [Server]. The zero value is valid: every zero field
// takes the default noted beside it.
type Config struct {
	// Models are the served model names; the first one labels /metrics.
	// Default ["sim-model"].
	Models []string
	// TTFT is the time from the start of running to the first token.
	// Default 200ms; negative means 0.
	TTFT time.Duration
	// ITL is the time between tokens. Default 20ms; negative means 0.
	ITL time.Duration
	// PrefillPerToken is the prefill time of each prompt token not found
	// in the prefix cache (every prompt token when the cache is off): it
	// is added to TTFT before the load factor. Default 0 (negative too).
	PrefillPerToken time.Duration
	// MaxNumSeqs is how many requests run at once; more wait in FIFO
	// order and count in num_requests_waiting. Default 256.
	MaxNumSeqs int
	// TimeFactorUnderLoad stretches TTFT and ITL with the running batch,
	// as llm-d-inference-sim does: each is multiplied by
	// 1 + (F-1)·(running-1)/(MaxNumSeqs-1), read from the running count
	// when the token is scheduled (running includes the request itself),
	// so F is the factor of a full batch. Default (and any value below 1,
	// or MaxNumSeqs 1) 1: latency does not depend on the load.
	TimeFactorUnderLoad float64
	// OwnClocks gives each request's tokens a clock of their own (TTFT
	// after it starts running, then each ITL), in place of the engine's
	// steps that produce the tokens of all running requests together
	// (steps.go). The benchmark's latency rounds use it to time a chunk's
	// way through a proxy apart from the queue of a step's burst.
	// Default false: steps, as vLLM.
	OwnClocks bool
	// PrefixCacheTokens, when at least BlockSize, turns on a prefix cache
	// of that many tokens (rounded down to whole blocks of BlockSize), as
	// vLLM's automatic prefix caching on chat, completions, Responses and
	// Messages: a request's leading full blocks found in it count as
	// cached tokens (usage, /metrics), and its prompt's full blocks join
	// it once its prefill is done, evicting the least recently used
	// blocks no running request holds. See the package doc for what a
	// prompt's blocks are. Default 0: off, and the usage bodies carry no
	// cached-token details.
	PrefixCacheTokens int
	// DefaultMaxTokens is the completion length when the request sets
	// none. Default 16.
	DefaultMaxTokens int
	// MaxModelLen bounds prompt plus completion tokens (400 beyond it) and
	// is reported by /v1/models. Default 32768.
	MaxModelLen int
	// MaxStoredResponses bounds the Responses API store of this instance
	// (store=true keeps a finished response for GET /v1/responses/{id} and
	// previous_response_id); beyond it the oldest is forgotten. Default
	// 1024; negative stores nothing.
	MaxStoredResponses int
	// EmbeddingDim is the length of a /v1/embeddings vector (the most
	// "dimensions" may ask for). Default 16.
	EmbeddingDim int
	// Faults script misbehaving responses for a whole run; see [Fault]
	// and [FaultRule]. The first rule that matches a request and is within
	// its After/Count window applies; a rule outside it lets the next try.
	// Empty: none.
	Faults []FaultRule
}

func (c Config) withDefaults() Config {
	if len(c.Models) == 0 {
		c.Models = []string{"sim-model"}
	}
	c.Models = append([]string(nil), c.Models...)
	c.Faults = append([]FaultRule(nil), c.Faults...)
	if c.TTFT == 0 {
		c.TTFT = 200 * time.Millisecond
	}
	if c.ITL == 0 {
		c.ITL = 20 * time.Millisecond
	}
	c.TTFT, c.ITL, c.PrefillPerToken = max(c.TTFT, 0), max(c.ITL, 0), max(c.PrefillPerToken, 0)
	if c.MaxNumSeqs <= 0 {
		c.MaxNumSeqs = 256
	}
	if !(c.TimeFactorUnderLoad >= 1) || math.IsInf(c.TimeFactorUnderLoad, 0) {
		c.TimeFactorUnderLoad = 1
	}
	if c.DefaultMaxTokens <= 0 {
		c.DefaultMaxTokens = 16
	}
	if c.MaxStoredResponses == 0 {
		c.MaxStoredResponses = 1024
	}
	if c.EmbeddingDim <= 0 {
		c.EmbeddingDim = 16
	}
	if c.MaxModelLen <= 0 {
		c.MaxModelLen = 32768
	}
	return c
}

// Stats are the simulator's counters and current gauges (a snapshot).
type Stats struct {
	Requests  int64 // valid requests received on any generation, pooling or tokenizer route
	Completed int64 // responses sent in full
	Aborted   int64 // requests whose client went away first
	Failed    int64 // requests failed on purpose (InjectFailure, X-Sim-Fail-Status, a Fault)
	Running   int64 // requests running now
	Waiting   int64 // requests waiting for a running slot now

	// With the prefix cache on: prompt tokens looked up in it, and found
	// (vllm:prefix_cache_queries_total and _hits_total).
	PrefixCacheQueries, PrefixCacheHits int64
}

// Abort reports one request abandoned by its client.
type Abort struct {
	ID     string    // the request id (X-Request-Id, or the generated one)
	At     time.Time // when the simulator noticed
	Queued bool      // it was still waiting for a running slot
}

// Load overrides the load gauges reported on /metrics, to drive a
// control loop in tests. Requests are still scheduled on real capacity.
type Load struct {
	Waiting, Running float64
	KVCache          float64 // 0..1
}

// Failure makes the next requests fail on purpose. Status wins over the
// resets; the zero Failure (with Count 0) fails nothing but still counts
// as injected until ClearFailures.
type Failure struct {
	// Count is how many of the next generation requests fail; 0 means
	// every request until ClearFailures.
	Count int
	// StatusBeforeFirstByte, when > 0, answers with that status and an
	// OpenAI-shaped error body instead of generating.
	StatusBeforeFirstByte int
	// ResetBeforeFirstByte closes the connection before any response byte.
	ResetBeforeFirstByte bool
	// ResetAfterChunks, when > 0, closes a streamed response's connection
	// (no final chunk: the client sees a broken stream) after that many
	// data events. A non-streamed response is cut before any byte.
	ResetAfterChunks int
}
