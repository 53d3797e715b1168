package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const messagesStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":9,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: ping\n" +
	`data: {"type":"ping"}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tok0"}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" tok1"}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":2}}` + "\n\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

const messagesReq = `{"model":"m","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// x-api-key authenticates; the events pass through unchanged, ping
// included; anthropic-version goes upstream; the usage of message_start
// and message_delta settles the reservation.
func TestMessagesStreamExact(t *testing.T) {
	r := newAPIRig(t, "{tpm: 1000}", sseBody(messagesStream))
	w := r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: ka", "Anthropic-Version: 2023-06-01")
	expect(t, w, 200, messagesStream)
	if got := r.ups[0].seen()[0]; got.Version != "2023-06-01" || got.Path != "/v1/messages" {
		t.Errorf("upstream saw %+v", got)
	}
	// Reserved 20 + the estimate of messages (32 bytes: 9); charged 9+2.
	w = r.call("POST", "/v1/messages", messagesReq, "Authorization: Bearer ka")
	expect(t, w, 200, messagesStream)
	expectHeader(t, w, "anthropic-ratelimit-tokens-remaining", fmt.Sprint(1000-11-29))
	expectHeader(t, w, "anthropic-ratelimit-tokens-limit", "1000")
	expectHeader(t, w, "x-ratelimit-remaining-tokens", "")
	expectHeader(t, w, "request-id", "req-1")
	expectHeader(t, w, "X-Request-Id", "req-1")
}

// OpenAI paths keep OpenAI's headers and carry no Anthropic ones.
func TestOpenAIPathsKeepOpenAIHeaders(t *testing.T) {
	r := newAPIRig(t, "{tpm: 1000}", jsonBody(200, `{"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	w := r.call("POST", "/v1/chat/completions", `{"model":"m","max_tokens":5,"messages":[]}`, "Authorization: Bearer ka")
	expectHeader(t, w, "x-ratelimit-limit-tokens", "1000")
	expectHeader(t, w, "anthropic-ratelimit-tokens-limit", "")
	expectHeader(t, w, "X-Request-Id", "req-1")
	expectHeader(t, w, "request-id", "")
}

// Errors on Anthropic routes come in Anthropic's shape: before the
// stream as a status and body (a 429 with retry-after), inside it as an
// error event.
func TestMessagesErrors(t *testing.T) {
	cut := strings.SplitAfter(messagesStream, `"text":"tok0"}}`+"\n\n")[0]
	r := newAPIRig(t, "{rpm: 3}", sseBody(cut))
	expect(t, r.call("POST", "/v1/messages", messagesReq), 401,
		`{"type":"error","error":{"type":"authentication_error","message":"You didn't provide an API key. Send it as 'x-api-key: \u003ckey\u003e' or 'Authorization: Bearer \u003ckey\u003e'."}}`)
	expect(t, r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: nope"), 401,
		`{"type":"error","error":{"type":"authentication_error","message":"Incorrect API key provided."}}`)
	expect(t, r.call("POST", "/v1/messages", `{"model":"m","messages":[]}`, "X-Api-Key: ka"), 400,
		`{"type":"error","error":{"type":"invalid_request_error","message":"Missing required parameter: 'max_tokens'."}}`)
	expect(t, r.call("POST", "/v1/messages", `{"model":"nope","max_tokens":1,"messages":[]}`, "X-Api-Key: ka"), 404,
		`{"type":"error","error":{"type":"not_found_error","message":"The model `+"`nope`"+` does not exist."}}`)
	expect(t, r.call("POST", "/v1/messages/batches", `{}`, "X-Api-Key: ka"), 404,
		`{"type":"error","error":{"type":"not_found_error","message":"Unknown path /v1/messages/batches."}}`)

	w := r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: ka")
	expect(t, w, 200, cut+"event: error\n"+
		`data: {"type":"error","error":{"type":"api_error","message":"The model server's stream was malformed (not JSON, or it ended before its last event)."}}`+"\n\n")
	r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: ka")
	r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: ka")
	w = r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: ka")
	if w.Code != 429 || !strings.HasPrefix(w.Body.String(), `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached for m in tenant a on requests per min (RPM): Limit 3, Remaining 0. Please try again in `) {
		t.Errorf("429: %d %s", w.Code, w.Body)
	}
	if w.Header().Get("Retry-After") == "" || w.Header().Get("retry-after-ms") == "" {
		t.Errorf("429 without retry-after: %v", w.Header())
	}
}

// count_tokens is direct: it does not wait in the bucket's queue. The
// bucket releases one request per 1000 s and has just released one, so a
// queued request would wait; count_tokens answers at once, every time.
func TestCountTokensIsDirect(t *testing.T) {
	r := newAPIRig(t, "{rate: 0.001}", jsonBody(200, `{"input_tokens":7}`))
	expect(t, r.call("POST", "/v1/messages", `{"model":"m","max_tokens":1,"messages":[]}`, "X-Api-Key: ka"), 200, `{"input_tokens":7}`)
	for range 3 {
		expect(t, r.call("POST", "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-Api-Key: ka"),
			200, `{"input_tokens":7}`)
	}
	if got := r.ups[0].seen()[1]; got.Path != "/v1/messages/count_tokens" || got.Method != "POST" {
		t.Errorf("upstream saw %+v", got)
	}
}

// A queued stream on a named-event route carries the same ": queued"
// comments as chat while it waits, then its events unchanged. At 0.5/s
// the second request is released 2 s after the first, and its first
// comment is due 100 ms after it is queued: 1.9 s of margin for the time
// between the two requests (the rig runs on real sockets, not in a
// synctest bubble).
func TestQueuedNamedStreamHeartbeats(t *testing.T) {
	r := newAPIRigWith(t, "{rate: 0.5}", func(c *Config) { c.Heartbeat = 100 * time.Millisecond }, sseBody(messagesStream))
	expect(t, r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: ka"), 200, messagesStream)
	w := r.call("POST", "/v1/messages", messagesReq, "X-Api-Key: ka") // waits up to 2 s for its release
	body := w.Body.String()
	if !strings.HasPrefix(body, ": queued position=1 eta_ms=0\n\n") || !strings.HasSuffix(body, messagesStream) {
		t.Errorf("body %q\nwant queued comments, then the stream", body)
	}
	if rest := strings.TrimSuffix(body, messagesStream); strings.Trim(strings.ReplaceAll(rest, ": queued position=1 eta_ms=0\n\n", ""), "") != "" {
		t.Errorf("unexpected bytes before the stream: %q", rest)
	}
}
