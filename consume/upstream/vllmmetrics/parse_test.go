package vllmmetrics

import (
	"reflect"
	"strings"
	"testing"
)

const vllmMetrics = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3-8B"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3-8B"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3-8B"} 7.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3-8B"} 5.0
vllm:num_requests_waiting{model_name="odd \"name\"\\x", engine="0"} 1e1 1712345678000
vllm:num_requests_waiting_by_reason{model_name="meta-llama/Llama-3-8B",reason="capacity"} 99
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3-8B"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3-8B"} 0.75
vllm:num_requests_waiting{engine="0"} 42
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="meta-llama/Llama-3-8B"} 0.0
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="meta-llama/Llama-3-8B"} 300.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="meta-llama/Llama-3-8B"} 4.5
vllm:inter_token_latency_seconds_count{engine="0",model_name="meta-llama/Llama-3-8B"} 600.0
vllm:inter_token_latency_seconds_sum{engine="1",model_name="meta-llama/Llama-3-8B"} 1.5
vllm:inter_token_latency_seconds_count{engine="1",model_name="meta-llama/Llama-3-8B"} 200.0
vllm:time_per_output_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3-8B"} 99
vllm:time_per_output_token_seconds_count{engine="0",model_name="meta-llama/Llama-3-8B"} 99
vllm:time_per_output_token_seconds_sum{model_name="old"} 2.5
vllm:time_per_output_token_seconds_count{model_name="old"} 100
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",num_gpu_blocks="27480"} 1.0
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="27000"} 1.0
vllm:cache_config_info_extra{block_size="16",num_gpu_blocks="99999999"} 1.0
`

func TestParseGauges(t *testing.T) {
	got, err := Parse(strings.NewReader(vllmMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want := Reading{Models: map[string]Gauges{
		"meta-llama/Llama-3-8B": {Waiting: 12, Running: 5, KVCache: 0.75, ITLSeconds: 6, ITLTokens: 800},
		`odd "name"\x`:          {Waiting: 10},
		"old":                   {ITLSeconds: 2.5, ITLTokens: 100},
	}, CacheTokens: 27480 * 16}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse = %#v\nwant %#v", got, want)
	}
}

func TestParseIgnoresCacheLabelsThatAreNotSizes(t *testing.T) {
	for _, in := range []string{
		`vllm:cache_config_info{block_size="16"} 1`,
		`vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1`,
		`vllm:cache_config_info{block_size="-16",num_gpu_blocks="100"} 1`,
		`vllm:cache_config_info{block_size="16",num_gpu_blocks="999999999999999999"} 1`,
	} {
		got, err := Parse(strings.NewReader(in))
		if err != nil || got.CacheTokens != 0 {
			t.Errorf("Parse(%q) = %d tokens, %v; want 0, nil", in, got.CacheTokens, err)
		}
	}
}

func TestParseGaugesErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`vllm:num_requests_waiting{model_name="m"} x`, `metrics line 1: vllm:num_requests_waiting: value: strconv.ParseFloat: parsing "x": invalid syntax`},
		{"# c\nvllm:num_requests_running{model_name=\"m} 1", "metrics line 2: vllm:num_requests_running: unterminated label value"},
		{`vllm:kv_cache_usage_perc{model_name=m} 1`, `metrics line 1: vllm:kv_cache_usage_perc: malformed label in "model_name=m} 1"`},
		{`vllm:kv_cache_usage_perc{model_name="m"}`, "metrics line 1: vllm:kv_cache_usage_perc: want `value [timestamp]`, got \"\""},
	} {
		_, err := Parse(strings.NewReader(tc.in))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) error = %v, want %s", tc.in, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(vllmMetrics)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Parse(strings.NewReader(s)) // must not panic
	})
}

func TestMetricsURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:8000":     "http://h:8000/metrics",
		"http://h:8000/":    "http://h:8000/metrics",
		"http://h:8000/v1":  "http://h:8000/metrics",
		"http://h:8000/v1/": "http://h:8000/metrics",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}
