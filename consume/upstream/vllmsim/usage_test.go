package vllmsim

import (
	"encoding/json"
	"testing"
	"testing/synctest"
)

// TestUsageRules states each route's token count as a table: words are
// whitespace-separated, the output is max tokens long.
func TestUsageRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: -1, ITL: -1})
		for _, c := range []struct {
			path, body string
			hdr        map[string]string
			field      string // the usage object's key
			want       string
		}{
			// 2 words of input + 3 of instructions; 4 out.
			{"/v1/responses", `{"input":"a b","instructions":"x y z","max_output_tokens":4}`, nil, "usage",
				`{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":9}`},
			// 1 + 2 (text parts) words; default 16 out.
			{"/v1/responses", `{"input":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"input_text","text":"b c"}]}]}`, nil, "usage",
				`{"input_tokens":3,"input_tokens_details":{"cached_tokens":0},"output_tokens":16,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":19}`},
			// system 2 + messages 3.
			{"/v1/messages", `{"model":"sim-model","system":"s t","messages":[{"role":"user","content":"a b"},{"role":"assistant","content":"c"}],"max_tokens":2}`, nil, "usage",
				`{"input_tokens":5,"output_tokens":2}`},
			// 2 + 1 words, 3 + 1 ids.
			{"/v1/embeddings", `{"input":["a b","c"]}`, nil, "usage", `{"prompt_tokens":3,"total_tokens":3,"completion_tokens":0,"prompt_tokens_details":null}`},
			{"/v1/embeddings", `{"input":[[1,2,3],[4]]}`, nil, "usage", `{"prompt_tokens":4,"total_tokens":4,"completion_tokens":0,"prompt_tokens_details":null}`},
			// (2+1) + (2+2) for two documents.
			{"/rerank", `{"query":"a b","documents":["c","d e"]}`, nil, "usage", `{"prompt_tokens":7,"total_tokens":7}`},
			{"/score", `{"text_1":"a b","text_2":["c","d e"]}`, nil, "usage", `{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0,"prompt_tokens_details":null}`},
			// 2 prompt words; 3 out; 100 bytes = 1 s (rounded up) of audio.
			{"/v1/audio/transcriptions", multipartBody(100, "prompt", "a b", "max_completion_tokens", "3"), multipartHdr, "usage", `{"type":"duration","seconds":1}`},
			{"/tokenize", `{"messages":[{"role":"user","content":"a b"},{"role":"user","content":[{"type":"text","text":"c"}]}]}`, nil, "count", `3`},
			{"/v1/messages/count_tokens", `{"model":"sim-model","system":"s","messages":[{"role":"user","content":"a b"}]}`, nil, "input_tokens", `3`},
		} {
			rec := serve(t.Context(), s, "POST", c.path, c.body, c.hdr)
			var body map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || string(body[c.field]) != c.want {
				t.Errorf("%s %s: %s = %s (%v), want %s", c.path, c.body, c.field, body[c.field], err, c.want)
			}
		}
	})
}
