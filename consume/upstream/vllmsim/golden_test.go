package vllmsim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out")

// TestGolden compares whole responses (status, content type, body) with
// testdata/<case>.out. It runs in a synctest bubble, so "created" is the
// bubble's epoch (946684800) and the latencies take no real time.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		hdr              map[string]string
	}{
		{"chat_stream", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":3`), reqID},
		{"chat_stream_usage", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":3,"stream_options":{"include_usage":true}`), reqID},
		{"chat_stream_options_empty", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":1,"stream_options":{}`), reqID},
		{"chat_stream_usage_false", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":1,"stream_options":{"include_usage":false}`), reqID},
		{"chat_json", "/v1/chat/completions", chatBody(`,"max_tokens":3`), reqID},
		{"chat_max_completion_tokens_wins", "/v1/chat/completions", chatBody(`,"max_tokens":9,"max_completion_tokens":2`), reqID},
		{"chat_default_tokens_parts", "/v1/chat/completions", `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a b c"}]}]}`, reqID},
		{"completion_stream_usage", "/v1/completions", `{"model":"sim-model","prompt":"one two three","stream":true,"max_tokens":2,"stream_options":{"include_usage":true}}`, reqID},
		{"completion_json", "/v1/completions", `{"model":"sim-model","prompt":["a b","c"],"max_tokens":2}`, reqID},
		{"completion_token_ids", "/v1/completions", `{"prompt":[1,2,3,4],"max_tokens":1}`, reqID},
		{"err_bad_json", "/v1/chat/completions", `{"model":`, nil},
		{"err_unknown_model", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, nil},
		{"err_stream_options_without_stream", "/v1/chat/completions", chatBody(`,"stream_options":{"include_usage":true}`), nil},
		{"err_max_tokens_zero", "/v1/chat/completions", chatBody(`,"max_tokens":0`), nil},
		{"err_no_messages", "/v1/chat/completions", `{"model":"sim-model"}`, nil},
		{"err_context_length", "/v1/completions", `{"prompt":"a b c","max_tokens":100}`, nil},
		{"err_injected_status", "/v1/chat/completions", chatBody(""), map[string]string{"X-Sim-Fail-Status": "503"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{MaxModelLen: 64})
				rec := serve(t.Context(), s, "POST", tc.path, tc.body, tc.hdr)
				got := fmt.Sprintf("%d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
				checkGolden(t, filepath.Join("testdata", tc.name+".out"), got)
			})
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}
