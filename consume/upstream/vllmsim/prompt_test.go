package vllmsim

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzPromptKey renders arbitrary chat, Messages and Responses bodies
// for the prefix cache: it never panics, hashes exactly the tokens the
// simulator counts (markers are not tokens), and stops at its block
// bound.
func FuzzPromptKey(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"a b c"}]}`,
		`{"tools":[{"type":"function"}],"messages":[{"role":"system","content":[{"type":"text","text":"x y"},{"type":"image_url","image_url":{"url":"u"}}]}]}`,
		`{"system":[{"type":"text","text":"s t"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":"r"}]}]}`,
		`{"input":[{"role":"user","content":"a\u0000b c"}],"prompt":[[1,2],[3]]}`,
		`{"messages":[{"role":"user","content":null},{"content":[{"text":null}]}],"prompt":["a b","c"]}`,
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, body []byte, maxBlocks uint8) {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
			Tools    json.RawMessage   `json:"tools"`
			System   json.RawMessage   `json:"system"`
			Input    json.RawMessage   `json:"input"`
			Prompt   json.RawMessage   `json:"prompt"`
		}
		if json.Unmarshal(body, &req) != nil {
			return
		}
		check := func(name string, want int, render func(*blockHasher)) {
			h := newBlockHasher(int(maxBlocks))
			render(h)
			if wantBlocks := min(want/BlockSize, int(maxBlocks)); len(h.blocks) != wantBlocks {
				t.Fatalf("%s: %d blocks, want %d", name, len(h.blocks), wantBlocks)
			}
			unbounded := newBlockHasher(1 << 30)
			render(unbounded)
			if unbounded.tokens != want {
				t.Fatalf("%s: hashed %d tokens, counted %d", name, unbounded.tokens, want)
			}
		}
		if n, e := messageWords(req.Messages); e == nil {
			check("chat", n, func(h *blockHasher) { h.raw(itemTools, req.Tools); h.messages(req.Messages) })
			check("messages", n+systemWords(req.System), func(h *blockHasher) {
				h.system(req.System)
				h.raw(itemTools, req.Tools)
				h.messages(req.Messages)
			})
		}
		if n, e := inputWords(req.Input); e == nil {
			check("responses", n, func(h *blockHasher) { h.input(req.Input) })
		}
		if n, e := promptWords(req.Prompt); e == nil {
			check("completion", n, func(h *blockHasher) { h.prompt(req.Prompt) })
		}
	})
}

// BenchmarkPromptKey is the prefix cache's cost per chat request with a
// 1,000-word system prompt and five 30-word turns (1,150 tokens, 71
// blocks): laying the prompt out and hashing it, then the lookup.
func BenchmarkPromptKey(b *testing.B) {
	msgs := []string{`{"role":"system","content":` + quote(words("s", 1000)) + `}`}
	for i := range 5 {
		msgs = append(msgs, `{"role":"user","content":`+quote(words("u"+strconv.Itoa(i)+"_", 20))+`}`,
			`{"role":"assistant","content":`+quote(words("tok", 10))+`}`)
	}
	var req wireRequest
	if err := json.Unmarshal([]byte(`{"messages":[`+strings.Join(msgs, ",")+`]}`), &req); err != nil {
		b.Fatal(err)
	}
	n, _ := messageWords(req.Messages)
	s := New(Config{PrefixCacheTokens: 1 << 20})
	j := &job{promptTokens: n}
	s.keyPrompt(j, func(h *blockHasher) { h.messages(req.Messages) })
	s.cache.insert(j.blocks, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		j := &job{promptTokens: n}
		s.keyPrompt(j, func(h *blockHasher) { h.messages(req.Messages) })
		if hit := s.cache.lookup(j.blocks); hit != len(j.blocks) {
			b.Fatalf("hit %d of %d", hit, len(j.blocks))
		}
		s.cache.release(j.blocks)
	}
}
