package vllmsim

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestTokenizeGolden(t *testing.T) {
	runGolden(t, []routeCase{
		{name: "tokenize_prompt", path: "/tokenize", body: `{"model":"sim-model","prompt":"tok0 tok12 hello tok007"}`},
		{name: "tokenize_messages_strs", path: "/tokenize", body: `{"messages":[{"role":"user","content":"hello  there"},{"role":"user","content":[{"type":"text","text":"tok3"}]}],"return_token_strs":true}`},
		{name: "tokenize_err_empty", path: "/tokenize", body: `{"model":"sim-model"}`},
		{name: "detokenize", path: "/detokenize", body: `{"model":"sim-model","tokens":[0,12,1073741824]}`},
		{name: "detokenize_err_no_tokens", path: "/detokenize", body: `{}`},
	})
}

// Tokenize takes no slot and no time, and its count is the chat
// prompt_tokens of the same messages.
func TestTokenizeInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxNumSeqs: 1, TTFT: time.Second})
		t0 := time.Now()
		rec := serve(t.Context(), s, "POST", "/tokenize", `{"messages":[{"role":"user","content":"hello  there"}]}`, nil)
		want := `{"count":2,"max_model_len":32768,"tokens":[1335831723,2028721501],"token_strs":null}`
		if d := time.Since(t0); d != 0 || rec.Code != 200 || rec.Body.String() != want {
			t.Errorf("took %v: %d %s, want %s", d, rec.Code, rec.Body, want)
		}
	})
}
