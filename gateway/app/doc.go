// Package app wires pacegate together: config → quotas, pacer and
// admitter; the queue (consume.Queue over the embedded or RocketMQ
// backend), its consumer and the fair-share scheduler; the upstream pool;
// the gateway's HTTP server; and the lifecycle around them (start, reload,
// graceful shutdown). It holds no rules of its own: each lives in the
// package it belongs to. main.go, the end-to-end tests and the
// benchmark harness all build the process through it, so what they run is
// the same thing.
package app
