// Package metrics exports pacegate's Prometheus metrics from its own
// registry, served on the admin listener at /metrics.
//
// [Metrics] is the observer of all three layers: it implements
// [gateway.Observer] (requests, 429s, queue wait, TTFT),
// [consume.Observer] (releases, suspends, drops, panics) and
// [upstream.Observer] (upstream results). Gauges that describe state
// (per-bucket backlog, upstream in-flight and health, pacing factors)
// are not kept up to date on every event: custom collectors read them
// from their sources at scrape time.
//
// Label cardinality is bounded however many buckets exist: tenant and
// model label values are capped (the rest fold into "_other"), per-bucket
// series exist only for the top-K buckets by backlog at scrape time, and
// the other state is aggregated per model. README.md explains the
// choices.
package metrics
