// Package vllmsim is a simulated vLLM OpenAI-compatible server: exact,
// deterministic and cheap, for tests, benchmarks and `pacegate sim`.
//
// It serves POST /v1/chat/completions and /v1/completions (streamed and
// not), GET /v1/models, /health and /metrics, with vLLM's wire format and
// error shapes. What it generates is fixed so that tests can compare
// bytes:
//
//   - The completion has exactly max_tokens tokens (max_completion_tokens
//     wins over max_tokens; neither means Config.DefaultMaxTokens). Token
//     i is the word "tok<i>" followed by a space, except the last one: three
//     tokens read "tok0 tok1 tok2". finish_reason is always "length".
//   - prompt_tokens is the number of whitespace-separated words across
//     all message contents (text parts included), or across the prompt(s)
//     of a completion; a prompt given as token ids counts its ids.
//   - Response ids are "chatcmpl-<X-Request-Id>" and "cmpl-<X-Request-Id>",
//     with a random hex id when the header is absent. "created" is the
//     Unix time at which the request arrived.
//   - n, temperature, stop and other sampling fields are accepted and
//     ignored: there is always one choice.
//
// Timing follows vLLM's scheduler in miniature: at most MaxNumSeqs
// requests run at once, the rest wait in FIFO order. A streamed response
// sends its headers at once (as vLLM does), then after TTFT from the
// start of running the role chunk and the first token, then one token
// every ITL, the finish chunk, the usage chunk (only when
// stream_options.include_usage is true; `"stream_options":{}` counts as
// true, as in vLLM) and "data: [DONE]". A non-streamed response is sent
// when the last token would have been.
//
// Unlike llm-d-inference-sim, the simulator aborts a request the moment
// its client goes away, while waiting, during TTFT or between tokens, and
// reports it on [Server.Aborts], as vLLM frees its KV cache.
//
// Faults make responses misbehave on purpose, for the gateway's fault
// suite: per request with the X-Sim-Fault header (stall-after=N,
// garbage-sse, truncated-json, no-done, slow-headers=D, status=N), or for
// a whole run with Config.Faults rules keyed by a marker in the prompt
// (`pacegate sim --fault stall-after=3,match=FAULT-STALL`). See [Fault].
// X-Sim-Fail-Status and [Server.InjectFailure] (a 5xx burst: the next N
// requests fail) remain. A request without a fault is answered exactly
// as described above.
//
// All time is read from package time, so tests may run the simulator
// inside a testing/synctest bubble.
package vllmsim
