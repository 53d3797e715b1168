// Package faults proves the gateway under faults, floods and hostile
// clients. It has no code of its own: its tests start a real
// gateway over real loopback sockets in front of simulated vLLMs
// (consume/upstream/vllmsim) and run one scenario at a time, each under a
// bounded load:
//
//   - upstream faults, scripted on the simulators with Config.Faults rules
//     keyed by a marker in the prompt (the gateway forwards the body, not
//     the client's headers): a stall mid-stream, garbage SSE, truncated
//     JSON, a close without [DONE], slow headers, and a 5xx burst
//     (InjectFailure);
//   - hostile clients: one that stops reading but keeps its connection,
//     slowloris connections by the thousand (make faults) trickling
//     headers (cut at read_header_timeout) or bodies (408 at
//     read_body_timeout), and a flood of unauthenticated and malformed
//     requests;
//   - restarts under a flood: an upstream killed and served again on
//     its address; the gateway process restarted with SIGTERM, its
//     clients retrying what it refused (for the embedded queue backend,
//     which lives in the gateway process, this is what restarting the
//     queue backend means); and config reloads by SIGHUP and by a file
//     change.
//
// The scenarios marked (process) run the pacegate binary, built once
// with `go build` into a temporary directory, as an OS process of its own
// in front of the same simulators: the suite signals it, and reads its
// CPU time (utime+stime, /proc/<pid>/stat) and RSS (/proc/<pid>/status).
// A million requests with random API keys (make faults) must not grow
// its RSS by more than keyRSSBound: nothing is kept per key before
// authentication.
//
// After each scenario it checks the invariant: every request is accounted
// for as a response, an explicit error, a timeout or a 4xx (nothing
// silent, nothing lost), and a legitimate tenant's requests, sent all the
// while, still complete (during a restart: complete or end with an
// explicit error). Under the slowloris floods the tenant's TTFT p50 must
// stay within 1.5× the clean baseline of the same run (make faults).
//
// `go test ./gateway/faults/` runs the fast version (a few seconds).
// `make faults` runs the longer one and writes RELIABILITY.md from its
// results (PACEGATE_FAULTS_LONG=1, PACEGATE_FAULTS_REPORT=path).
//
// secrets_test.go checks that neither an API key nor the admin token ever
// appears in a log line, a /metrics scrape or an error body, and that an
// unknown key, a malformed key and a wrong key get the same 401.
package faults
