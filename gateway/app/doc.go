// Package app wires pacegate together: config → quotas, pacer and
// admitter; the queue backend (embedded or RocketMQ) and its consumer; the
// upstream pool; the gateway's HTTP server; and the lifecycle around them
// (start, reload, graceful shutdown). main.go, the end-to-end tests and the
// benchmark harness all build the process through it, so what they run is
// the same thing.
package app
