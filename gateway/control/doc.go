// Package control is pacegate's closed loop on the model pool: it scrapes
// each upstream's vLLM /metrics (vllm:num_requests_waiting,
// vllm:num_requests_running, vllm:kv_cache_usage_perc, per model_name)
// every interval and adjusts each model's column factor in the
// [policy.Pacer]: a multiplicative decrease when the model's waiting queue
// stays above the target for several consecutive scrapes, an additive
// increase once it has drained, bounded by min and max factor (AIMD with
// hysteresis).
//
// The decision is the pure [Controller] (time is an argument); [Loop]
// owns the scraping goroutine, the HTTP client and the pins: an operator
// who pins a model's factor turns the loop off for that model until it
// is unpinned. High-priority tenants keep their pace when a column is
// tightened; that is the pacer's rule ([policy.Pacer.EffectiveRate]), not
// this package's.
package control
