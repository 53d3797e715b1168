package vllmsim

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func metricsText(t *testing.T, s *Server) string {
	t.Helper()
	rec := serve(t.Context(), s, "GET", "/metrics", "", nil)
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, "\n"+l+"\n") {
			t.Errorf("metrics lack %q in:\n%s", l, text)
		}
	}
}

func TestMetricsGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Models: []string{"m"}, MaxNumSeqs: 2, TTFT: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		for range 3 {
			go serve(ctx, s, "POST", "/v1/completions", `{"prompt":"a b","max_tokens":1}`, nil)
		}
		synctest.Wait()
		wantLines(t, metricsText(t, s),
			`# TYPE vllm:num_requests_running gauge`,
			`vllm:num_requests_running{model_name="m"} 2`,
			`vllm:num_requests_waiting{model_name="m"} 1`,
			`vllm:kv_cache_usage_perc{model_name="m"} 1`,
			`vllm:prompt_tokens_total{model_name="m"} 6`,
		)
		s.SetLoad(&Load{Waiting: 30, Running: 4, KVCache: 0.4})
		wantLines(t, metricsText(t, s),
			`vllm:num_requests_running{model_name="m"} 4`,
			`vllm:num_requests_waiting{model_name="m"} 30`,
			`vllm:kv_cache_usage_perc{model_name="m"} 0.4`,
		)
		s.SetLoad(nil)
		cancel()
		synctest.Wait()
		wantLines(t, metricsText(t, s),
			`vllm:num_requests_running{model_name="m"} 0`,
			`vllm_sim:aborted_requests_total{model_name="m"} 3`,
		)
	})
}

// The inter-token latency histogram counts each gap between two tokens
// of a request once, stretched by the batch it ran in: two streams of 3
// tokens in a full batch of 2 (factor 2) make 4 gaps of 20 ms; then one
// answer of 5 tokens alone, not streamed, 4 more of 10 ms.
func TestMetricsInterTokenLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Models: []string{"m"}, MaxNumSeqs: 2, TTFT: time.Millisecond, ITL: 10 * time.Millisecond, TimeFactorUnderLoad: 2})
		done := make(chan struct{})
		for range 2 {
			go func() {
				serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":"a b","max_tokens":3,"stream":true}`, nil)
				done <- struct{}{}
			}()
		}
		<-done
		<-done
		wantLines(t, metricsText(t, s),
			`# TYPE vllm:inter_token_latency_seconds histogram`,
			`vllm:inter_token_latency_seconds_bucket{le="+Inf",model_name="m"} 4`,
			`vllm:inter_token_latency_seconds_sum{model_name="m"} 0.08`,
			`vllm:inter_token_latency_seconds_count{model_name="m"} 4`,
		)
		serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":"a b","max_tokens":5}`, nil)
		wantLines(t, metricsText(t, s),
			`vllm:inter_token_latency_seconds_sum{model_name="m"} 0.12`,
			`vllm:inter_token_latency_seconds_count{model_name="m"} 8`,
		)
	})
}

func TestMetricsCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":"a","max_tokens":4}`, nil)
		serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":"a","max_tokens":4,"stream":true}`, nil)
		wantLines(t, metricsText(t, s),
			`vllm:generation_tokens_total{model_name="sim-model"} 8`,
			`vllm:request_success_total{finished_reason="length",model_name="sim-model"} 2`,
		)
	})
}

func TestModelsAndHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Models: []string{"a", "b"}, MaxModelLen: 128})
		rec := serve(t.Context(), s, "GET", "/v1/models", "", nil)
		body := rec.Body.String()
		for _, want := range []string{`"object":"list"`, `"id":"a"`, `"id":"b"`, `"owned_by":"vllm"`, `"max_model_len":128`, `"created":946684800`} {
			if !strings.Contains(body, want) {
				t.Errorf("models lack %s: %s", want, body)
			}
		}
		if rec := serve(t.Context(), s, "GET", "/health", "", nil); rec.Code != 200 || rec.Body.Len() != 0 {
			t.Errorf("/health: %d %q", rec.Code, rec.Body)
		}
		if rec := serve(t.Context(), s, "GET", "/v1/chat/completions", "", nil); rec.Code != 405 {
			t.Errorf("GET chat: %d", rec.Code)
		}
	})
}
