// Package vllmmetrics reads the load gauges of a vLLM server from its
// Prometheus /metrics: vllm:num_requests_running,
// vllm:num_requests_waiting and vllm:kv_cache_usage_perc, per
// model_name, the inter-token latency histogram's sum and count, and the
// KV cache's size from vllm:cache_config_info. The
// upstream pool reads them to find each server's room and to size its
// part of the prefix index, and the gateway's control loop to tighten a
// model's pace; the latency, how much a server slows as its batch fills.
package vllmmetrics
