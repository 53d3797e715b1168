package vllmsim

import (
	"strconv"
	"strings"
)

// Frames are built by hand so that their bytes (and field order) match
// vLLM's exactly; ids and model names are JSON-quoted once in parse.

func chunkHead(j *job) []byte {
	obj := `"text_completion"`
	if j.chat {
		obj = `"chat.completion.chunk"`
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"id":`...)
	b = append(b, j.respID...)
	b = append(b, `,"object":`...)
	b = append(b, obj...)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, j.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, j.model...)
	return append(b, `,"choices":`...)
}

func roleChunk(j *job) []byte {
	return append(chunkHead(j), `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`...)
}

// tokenText is token i of n: "tok<i> ", the last one without the space.
func tokenText(i, n int) string {
	if i == n-1 {
		return "tok" + strconv.Itoa(i)
	}
	return "tok" + strconv.Itoa(i) + " "
}

func tokenChunk(j *job, i int) []byte {
	text := quote(tokenText(i, j.maxTokens))
	b := chunkHead(j)
	if j.chat {
		b = append(b, `[{"index":0,"delta":{"content":`...)
		b = append(b, text...)
		return append(b, `},"logprobs":null,"finish_reason":null}]}`...)
	}
	b = append(b, `[{"index":0,"text":`...)
	b = append(b, text...)
	return append(b, `,"logprobs":null,"finish_reason":null,"stop_reason":null}]}`...)
}

func finishChunk(j *job) []byte {
	if j.chat {
		return append(chunkHead(j), `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`...)
	}
	return append(chunkHead(j), `[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}]}`...)
}

func usageChunk(j *job) []byte {
	b := append(chunkHead(j), `[],"usage":`...)
	return append(appendUsage(b, j, false), '}')
}

// appendUsage writes vLLM's UsageInfo; the non-streamed form carries
// prompt_tokens_details too (null unless the prefix cache is on). With
// the cache on both forms carry the cached tokens, as vLLM does with
// --enable-prompt-tokens-details.
func appendUsage(b []byte, j *job, nonStreamed bool) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(j.promptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(j.promptTokens+j.maxTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(j.maxTokens), 10)
	switch {
	case j.cacheable:
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(j.cachedTokens), 10)
		b = append(b, '}')
	case nonStreamed:
		b = append(b, `,"prompt_tokens_details":null`...)
	}
	return append(b, '}')
}

// fullResponse is the non-streamed chat.completion or text_completion.
func fullResponse(j *job) []byte {
	var text strings.Builder
	for i := range j.maxTokens {
		text.WriteString(tokenText(i, j.maxTokens))
	}
	head := chunkHead(j)
	if j.chat {
		head = []byte(strings.Replace(string(head), `"chat.completion.chunk"`, `"chat.completion"`, 1))
		head = append(head, `[{"index":0,"message":{"role":"assistant","content":`...)
		head = append(head, quote(text.String())...)
		head = append(head, `},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":`...)
	} else {
		head = append(head, `[{"index":0,"text":`...)
		head = append(head, quote(text.String())...)
		head = append(head, `,"logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_logprobs":null}],"usage":`...)
	}
	return append(appendUsage(head, j, true), '}')
}
