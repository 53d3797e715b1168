// Package faults proves the gateway under faults, floods and hostile
// clients (issue 14). It has no code of its own: its tests start a real
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
//     slowloris connections trickling headers, and a flood of
//     unauthenticated and malformed requests.
//
// After each scenario it checks the invariant: every request is accounted
// for as a response, an explicit error, a timeout or a 4xx (nothing
// silent, nothing lost), and a legitimate tenant's requests, sent all the
// while, still complete.
//
// `go test ./gateway/faults/` runs the fast version (a few seconds).
// `make faults` runs the longer one and writes RELIABILITY.md from its
// results (PACEGATE_FAULTS_LONG=1, PACEGATE_FAULTS_REPORT=path).
//
// secrets_test.go checks that neither an API key nor the admin token ever
// appears in a log line, a /metrics scrape or an error body, and that an
// unknown key and a wrong key get the same 401.
package faults
