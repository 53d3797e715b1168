package vllmsim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// words is n distinct words with the given stem: "a0 a1 ...".
func words(stem string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = stem + strconv.Itoa(i)
	}
	return strings.Join(w, " ")
}

func chatMessages(msgs ...[2]string) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, `{"role":`+quote(m[0])+`,"content":`+quote(m[1])+`}`)
	}
	return `{"messages":[` + strings.Join(parts, ",") + `],"max_tokens":4}`
}

// cachedOf is a non-streamed chat or completion's
// usage.prompt_tokens_details.cached_tokens, or -1 without it.
func cachedOf(t *testing.T, rec *recorder) int {
	t.Helper()
	var body struct {
		Usage struct {
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if body.Usage.PromptTokensDetails == nil {
		return -1
	}
	return body.Usage.PromptTokensDetails.CachedTokens
}

// A conversation's second turn finds its first turn's full blocks; a
// different system prompt finds nothing. Turn 1 is 40 + 10 = 50 tokens
// (3 full blocks), turn 2 is 50 + 4 + 7 = 61.
func TestPrefixCacheConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 1024, TTFT: -1, ITL: -1})
		sys, user1 := [2]string{"system", words("s", 40)}, [2]string{"user", words("u", 10)}
		turn2 := chatMessages(sys, user1, [2]string{"assistant", "tok0 tok1 tok2 tok3"}, [2]string{"user", words("v", 7)})
		other := chatMessages([2]string{"system", words("x", 40)}, user1, [2]string{"assistant", "tok0 tok1 tok2 tok3"}, [2]string{"user", words("v", 7)})
		for i, c := range []struct {
			body string
			want int
		}{
			{chatMessages(sys, user1), 0},
			{turn2, 48},
			{other, 0},
		} {
			if got := cachedOf(t, serve(t.Context(), s, "POST", "/v1/chat/completions", c.body, nil)); got != c.want {
				t.Errorf("request %d: cached_tokens %d, want %d", i, got, c.want)
			}
		}
		wantLines(t, metricsText(t, s),
			`vllm:prefix_cache_queries_total{model_name="sim-model"} 172`, // 50 + 61 + 61
			`vllm:prefix_cache_hits_total{model_name="sim-model"} 48`,
			`vllm:cache_config_info{block_size="16",enable_prefix_caching="True",num_gpu_blocks="64"} 1`,
		)
		if st := s.Stats(); st.PrefixCacheQueries != 172 || st.PrefixCacheHits != 48 {
			t.Errorf("stats %+v, want 172 tokens queried, 48 hit", st)
		}
		if n := s.cache.cached(); n != 3+3 { // turn 1's (turn 2's are the same), the other's
			t.Errorf("%d blocks cached, want 6", n)
		}
	})
}

// Roles, tools and message boundaries are part of the key: the same
// words under another role, or with other tools, miss.
func TestPrefixCacheKeyMarkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 1024, TTFT: -1, ITL: -1})
		text := words("w", 40)
		for i, c := range []struct {
			body string
			want int
		}{
			{chatMessages([2]string{"system", text}), 0},
			{chatMessages([2]string{"system", text}), 32},
			{chatMessages([2]string{"user", text}), 0},
			{`{"tools":[{"type":"function","function":{"name":"f"}}],` + chatMessages([2]string{"user", text})[1:], 0},
			{`{"tools":[ {"type":"function", "function":{"name":"f"}} ],` + chatMessages([2]string{"user", text})[1:], 32},
			{chatMessages([2]string{"user", words("w", 20)}, [2]string{"user", words("w", 40)[len(words("w", 20))+1:]}), 16},
		} {
			if got := cachedOf(t, serve(t.Context(), s, "POST", "/v1/chat/completions", c.body, nil)); got != c.want {
				t.Errorf("request %d: cached_tokens %d, want %d", i, got, c.want)
			}
		}
	})
}

// With room for 4 blocks, each release makes a request's blocks the most
// recent, its last block least recent of them, so eviction takes tails
// first. A, B, C are 33-token prompts (2 full blocks), D a 17-token one.
func TestPrefixCacheLRUEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 64, TTFT: -1, ITL: -1})
		prompt := func(stem string, n int) string { return `{"prompt":` + quote(words(stem, n)) + `,"max_tokens":1}` }
		a, b, d := prompt("a", 33), prompt("b", 33), prompt("d", 17)
		for i, c := range []struct {
			body string
			want int
		}{
			{a, 0},  // LRU: A1 A0
			{b, 0},  // A1 A0 B1 B0
			{a, 32}, // B1 B0 A1 A0
			{d, 0},  // evicts B1: B0 A1 A0 D0
			{b, 16}, // B0 found; B1 evicts A1: A0 D0 B1 B0
			{a, 16}, // A0 found; A1 evicts D0: B1 B0 A1 A0
			{d, 0},
		} {
			if got := cachedOf(t, serve(t.Context(), s, "POST", "/v1/completions", c.body, nil)); got != c.want {
				t.Errorf("request %d: cached_tokens %d, want %d", i, got, c.want)
			}
		}
		wantLines(t, metricsText(t, s),
			`vllm:prefix_cache_queries_total{model_name="sim-model"} 199`, // 5·33 + 2·17
			`vllm:prefix_cache_hits_total{model_name="sim-model"} 64`,
		)
		if n := s.cache.cached(); n != 4 {
			t.Errorf("%d blocks cached, want 4", n)
		}
	})
}

// As in vLLM, a prompt's last token is always computed: a 32-token
// prompt seen before finds 16 tokens, not 32; a 31-token one none.
func TestPrefixCacheLastTokenComputed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 1024, TTFT: -1, ITL: -1})
		for i, c := range []struct {
			n, want int
		}{{32, 0}, {32, 16}, {33, 32}, {15, 0}, {15, 0}} {
			body := fmt.Sprintf(`{"prompt":%s,"max_tokens":1}`, quote(words("p", c.n)))
			if got := cachedOf(t, serve(t.Context(), s, "POST", "/v1/completions", body, nil)); got != c.want {
				t.Errorf("request %d (%d tokens): cached_tokens %d, want %d", i, c.n, got, c.want)
			}
		}
	})
}

// A prompt longer than the cache keys only the blocks the cache can
// hold: 2,000 tokens against 4 blocks hash 4 blocks, and a repeat finds
// all 4.
func TestPrefixCacheHugePrompt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 64, TTFT: -1, ITL: -1, MaxModelLen: 4096})
		body := `{"prompt":` + quote(words("h", 2000)) + `,"max_tokens":1}`
		for i, want := range []int{0, 64} {
			if got := cachedOf(t, serve(t.Context(), s, "POST", "/v1/completions", body, nil)); got != want {
				t.Errorf("request %d: cached_tokens %d, want %d", i, got, want)
			}
		}
	})
}

func TestPrefixCacheFlag(t *testing.T) {
	var out strings.Builder
	cfg, _, err := parseFlags([]string{"--prefix-cache-tokens", "4096"}, &out)
	if err != nil || cfg.PrefixCacheTokens != 4096 {
		t.Fatalf("cfg %+v, %v", cfg, err)
	}
	if s := New(cfg); s.cache == nil || s.cache.capacity != 256 {
		t.Fatalf("cache %+v, want 256 blocks", s.cache)
	}
	if s := New(Config{PrefixCacheTokens: 15}); s.cache != nil {
		t.Fatal("a cache smaller than a block is on")
	}
}

// kvUsage is the kv_cache_usage_perc line's value.
func kvUsage(t *testing.T, s *Server) string {
	t.Helper()
	const name = `vllm:kv_cache_usage_perc{model_name="sim-model"} `
	text := metricsText(t, s)
	i := strings.Index(text, "\n"+name)
	if i < 0 {
		t.Fatalf("no kv_cache_usage_perc in %s", text)
	}
	v, _, _ := strings.Cut(text[i+1+len(name):], "\n")
	return v
}

// With the cache on, kv_cache_usage_perc is the blocks running requests
// hold (cached ones they pinned + those outside the cache) / capacity,
// capped at 1, and a cached block nobody holds is free: a
// 33-token prompt holds 3 blocks while it prefills, 2 of them cached
// once its first token is out, a 4th from its 16th token (49 tokens);
// two requests sharing the cached 2 blocks count them once.
func TestKVCacheUsageFollowsCacheAndBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 160, TTFT: 100 * time.Millisecond, ITL: 10 * time.Millisecond})
		body := `{"prompt":` + quote(words("a", 33)) + `,"max_tokens":20,"stream":true}`
		t0 := time.Now()
		done := make(chan struct{})
		go func() {
			serve(t.Context(), s, "POST", "/v1/completions", body, nil)
			close(done)
		}()
		for _, step := range []struct {
			at   int // ms after t0
			want string
		}{{0, "0.3"}, {105, "0.3"}, {245, "0.3"}, {255, "0.4"}} {
			time.Sleep(t0.Add(time.Duration(step.at) * time.Millisecond).Sub(time.Now()))
			synctest.Wait()
			if got := kvUsage(t, s); got != step.want {
				t.Errorf("at %d ms: kv usage %s, want %s", step.at, got, step.want)
			}
		}
		<-done // at 290 ms
		if got := kvUsage(t, s); got != "0" {
			t.Errorf("idle: kv usage %s, want 0 (the 2 cached blocks are held by nobody: free to vLLM)", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		for range 2 {
			go serve(ctx, s, "POST", "/v1/completions", body, nil)
		}
		synctest.Wait()
		if got := kvUsage(t, s); got != "0.4" {
			t.Errorf("two sharing: kv usage %s, want 0.4", got)
		}
		go serve(ctx, s, "POST", "/v1/completions", `{"prompt":`+quote(words("b", 200))+`,"max_tokens":1}`, nil)
		synctest.Wait()
		if got := kvUsage(t, s); got != "1" {
			t.Errorf("over capacity: kv usage %s, want 1", got)
		}
		cancel()
		synctest.Wait()
		if got := kvUsage(t, s); got != "0" {
			t.Errorf("after aborts: kv usage %s, want 0", got)
		}
	})
}
