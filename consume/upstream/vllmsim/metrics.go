package vllmsim

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
)

// metrics serves GET /metrics in the Prometheus text format, with vLLM's
// metric names, labelled with the first model name. Without SetLoad,
// kv_cache_usage_perc is running/MaxNumSeqs with the prefix cache off;
// with it on, the share of its blocks running requests hold, at most 1
// (cached blocks nobody holds count as free, as vLLM counts them).
func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	st := s.Stats()
	s.mu.Lock()
	load := s.load
	s.mu.Unlock()
	running, waiting := float64(st.Running), float64(st.Waiting)
	kv := running / float64(s.cfg.MaxNumSeqs)
	if s.cache != nil {
		kv = s.cache.usage()
	}
	if load != nil {
		running, waiting, kv = load.Running, load.Waiting, load.KVCache
	}
	label := `{model_name=` + quote(s.cfg.Models[0]) + `}`
	var b bytes.Buffer
	metric(&b, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", label, running)
	metric(&b, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", label, waiting)
	metric(&b, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", label, kv)
	metric(&b, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", label, float64(s.promptTokens.Load()))
	metric(&b, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", label, float64(s.genTokens.Load()))
	metric(&b, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", label, float64(st.PrefixCacheQueries))
	metric(&b, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", label, float64(st.PrefixCacheHits))
	itl(&b, label, s.itlNanos.Load(), s.itlTokens.Load())
	if s.cache != nil {
		info := `{block_size="` + strconv.Itoa(BlockSize) + `",enable_prefix_caching="True",num_gpu_blocks="` + strconv.Itoa(s.cache.capacity) + `"}`
		metric(&b, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig", info, 1)
	}
	success := `{finished_reason="length",model_name=` + quote(s.cfg.Models[0]) + `}`
	metric(&b, "vllm:request_success_total", "counter", "Count of successfully processed requests.", success, float64(st.Completed))
	metric(&b, "vllm_sim:requests_total", "counter", "Valid generation requests received (simulator only).", label, float64(st.Requests))
	metric(&b, "vllm_sim:aborted_requests_total", "counter", "Requests aborted by their client (simulator only).", label, float64(st.Aborted))
	metric(&b, "vllm_sim:failed_requests_total", "counter", "Requests failed on purpose (simulator only).", label, float64(st.Failed))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b.Bytes()) // a write error means the client left
}

// itl writes the inter-token latency histogram with its one bucket,
// +Inf: a reader learns the mean between two readings from its sum and
// count, as pacegate does.
func itl(b *bytes.Buffer, label string, nanos, tokens int64) {
	const name = "vllm:inter_token_latency_seconds"
	inf := `{le="+Inf",` + label[1:]
	fmt.Fprintf(b, "# HELP %s Histogram of inter-token latency in seconds.\n# TYPE %s histogram\n", name, name)
	fmt.Fprintf(b, "%s_bucket%s %d\n%s_sum%s %s\n%s_count%s %d\n", name, inf, tokens,
		name, label, strconv.FormatFloat(float64(nanos)/1e9, 'g', -1, 64), name, label, tokens)
}

func metric(b *bytes.Buffer, name, typ, help, labels string, v float64) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", name, help, name, typ, name, labels, strconv.FormatFloat(v, 'g', -1, 64))
}
