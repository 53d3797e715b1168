package vllmsim

import (
	"testing"
)

func TestMessagesGolden(t *testing.T) {
	const p = "/v1/messages"
	msgs := `"messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":[{"type":"text","text":"hi"}]}]`
	runGolden(t, []routeCase{
		{name: "messages_json", path: p, body: `{"model":"sim-model","system":"be brief",` + msgs + `,"max_tokens":3}`, hdr: reqID},
		{name: "messages_stream", path: p, body: `{"model":"sim-model","system":[{"type":"text","text":"be brief"}],` + msgs + `,"max_tokens":2,"stream":true}`, hdr: reqID},
		{name: "messages_count_tokens", path: p + "/count_tokens", body: `{"model":"sim-model","system":"be brief",` + msgs + `}`},
		{name: "messages_err_no_max_tokens", path: p, body: `{"model":"sim-model",` + msgs + `}`},
		{name: "messages_err_max_tokens_zero", path: p, body: `{"model":"sim-model",` + msgs + `,"max_tokens":0}`},
		{name: "messages_err_unknown_model", path: p, body: `{"model":"nope",` + msgs + `,"max_tokens":1}`},
		{name: "messages_err_bad_json", path: p, body: `{"model":`},
		{name: "fault_messages_no_done", path: p, body: `{"model":"sim-model",` + msgs + `,"max_tokens":1,"stream":true}`, hdr: withFault("no-done")},
		{name: "fault_messages_stall_after_2", path: p, body: `{"model":"sim-model",` + msgs + `,"max_tokens":3,"stream":true}`, hdr: withFault("stall-after=2")},
		{name: "fault_messages_garbage_sse", path: p, body: `{"model":"sim-model",` + msgs + `,"max_tokens":1,"stream":true}`, hdr: withFault("garbage-sse")},
		{name: "fault_messages_truncated_json", path: p, body: `{"model":"sim-model",` + msgs + `,"max_tokens":1,"stream":true}`, hdr: withFault("truncated-json")},
		{name: "fault_messages_status_529", path: p, body: `{"model":"sim-model",` + msgs + `,"max_tokens":1,"stream":true}`, hdr: withFault("status=529")},
		{name: "fault_messages_json_truncated", path: p, body: `{"model":"sim-model",` + msgs + `,"max_tokens":2}`, hdr: withFault("truncated-json")},
	})
}
