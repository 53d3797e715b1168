package vllmsim

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
)

// Each dialect reports the prefix cache as its API does. Every case sends
// the same 40-token prompt twice to a fresh simulator; the second finds
// two full blocks (32 tokens; the last token is always computed).
func TestCachedTokensInUsage(t *testing.T) {
	sys := words("s", 40)
	chat := `{"messages":[{"role":"system","content":` + quote(sys) + `}],"max_tokens":2`
	completion := `{"prompt":` + quote(sys) + `,"max_tokens":2`
	responses := `{"input":` + quote(sys) + `,"max_output_tokens":2`
	messages := `{"model":"sim-model","system":` + quote(sys) + `,"messages":[{"role":"user","content":"a b c d e f g h"}],"max_tokens":2`
	openAI := `"usage":{"prompt_tokens":40,"total_tokens":42,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":32}}`
	respUsage := `"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":42}`
	for _, c := range []struct {
		name, path, body string
		want             []string // substrings of the second response
	}{
		{"chat", "/v1/chat/completions", chat + `}`, []string{openAI + `}`}},
		{"chat_stream", "/v1/chat/completions", chat + `,"stream":true,"stream_options":{"include_usage":true}}`,
			[]string{`"choices":[],` + openAI + "}\n\ndata: [DONE]\n\n"}},
		{"completion", "/v1/completions", completion + `}`, []string{openAI + `}`}},
		{"completion_stream", "/v1/completions", completion + `,"stream":true,"stream_options":{}}`, []string{`"choices":[],` + openAI + `}`}},
		{"responses", "/v1/responses", responses + `}`, []string{respUsage}},
		{"responses_stream", "/v1/responses", responses + `,"stream":true}`, []string{"event: response.completed\n", respUsage}},
		// Anthropic counts cache reads apart: 48 - 32 = 16 input tokens.
		{"messages", "/v1/messages", messages + `}`, []string{`"usage":{"input_tokens":16,"cache_read_input_tokens":32,"output_tokens":2}}`}},
		{"messages_stream", "/v1/messages", messages + `,"stream":true}`, []string{
			`"usage":{"input_tokens":16,"cache_read_input_tokens":32,"output_tokens":0}}}`,
			`"usage":{"input_tokens":16,"cache_read_input_tokens":32,"output_tokens":2}}`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{PrefixCacheTokens: 1024, TTFT: -1, ITL: -1})
				serve(t.Context(), s, "POST", c.path, c.body, nil)
				rec := serve(t.Context(), s, "POST", c.path, c.body, nil)
				reports := 0
				for _, w := range c.want {
					if !strings.Contains(rec.Body.String(), w) {
						t.Errorf("%d %s\nlacks %s", rec.Code, rec.Body, w)
					}
					reports += strings.Count(w, `_tokens":32`)
				}
				if n := strings.Count(rec.Body.String(), `_tokens":32`); n != reports {
					t.Errorf("cached tokens reported %d times, want %d: %s", n, reports, rec.Body)
				}
			})
		})
	}
}

// A Responses follow-up lays out the instructions, the previous turns
// (input, then output) and its input: turn 2 (20 + 22 + 10 = 52 tokens)
// finds turn 1's 2 full blocks, turn 3 (20 + 34 + 10 = 64) turn 2's 3.
func TestCachedTokensResponsesFollowUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 1024, TTFT: -1, ITL: -1})
		instr := `"instructions":` + quote(words("i", 20)) + `,"max_output_tokens":2`
		for i, c := range []struct {
			body, want string
		}{
			{`{"input":` + quote(words("a", 20)) + `,` + instr + `}`, `"input_tokens":40,"input_tokens_details":{"cached_tokens":0}`},
			{`{"input":[{"role":"user","content":` + quote(words("b", 10)) + `}],"previous_response_id":"resp_t0",` + instr + `}`,
				`"input_tokens":52,"input_tokens_details":{"cached_tokens":32}`},
			{`{"input":` + quote(words("c", 10)) + `,"previous_response_id":"resp_t1",` + instr + `}`,
				`"input_tokens":64,"input_tokens_details":{"cached_tokens":48}`},
		} {
			hdr := map[string]string{"X-Request-Id": "t" + string(rune('0'+i))}
			if rec := serve(t.Context(), s, "POST", "/v1/responses", c.body, hdr); !strings.Contains(rec.Body.String(), c.want) {
				t.Errorf("turn %d: %d %s\nlacks %s", i+1, rec.Code, rec.Body, c.want)
			}
		}
	})
}

// TestGoldenPrefixCache pins whole responses with the cache on: the
// second of two identical requests, as testdata/<case>.out.
func TestGoldenPrefixCache(t *testing.T) {
	sys := quote(words("s", 40))
	for _, c := range []struct{ name, path, body string }{
		{"cached_chat_stream_usage", "/v1/chat/completions", `{"messages":[{"role":"system","content":` + sys + `}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`},
		{"cached_chat_json", "/v1/chat/completions", `{"messages":[{"role":"system","content":` + sys + `}],"max_tokens":2}`},
		{"cached_completion_json", "/v1/completions", `{"prompt":` + sys + `,"max_tokens":2}`},
		{"cached_messages_stream", "/v1/messages", `{"model":"sim-model","system":` + sys + `,"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{PrefixCacheTokens: 1024})
				serve(t.Context(), s, "POST", c.path, c.body, reqID)
				rec := serve(t.Context(), s, "POST", c.path, c.body, reqID)
				got := fmt.Sprintf("%d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
				checkGolden(t, filepath.Join("testdata", c.name+".out"), got)
			})
		})
	}
}
