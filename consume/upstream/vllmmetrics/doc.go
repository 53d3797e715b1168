// Package vllmmetrics reads the load gauges of a vLLM server from its
// Prometheus /metrics: vllm:num_requests_running,
// vllm:num_requests_waiting and vllm:kv_cache_usage_perc, per
// model_name. The upstream pool reads them to find each server's room,
// and the gateway's control loop to tighten a model's pace.
package vllmmetrics
