package vllmsim

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

func TestResponsesGolden(t *testing.T) {
	const p = "/v1/responses"
	runGolden(t, []routeCase{
		{name: "responses_json", path: p, body: `{"model":"sim-model","input":"hello there","max_output_tokens":3}`, hdr: reqID},
		{name: "responses_stream", path: p, body: `{"input":"hello there","instructions":"be brief","max_output_tokens":2,"stream":true}`, hdr: reqID},
		{name: "responses_messages_metadata", path: p, body: `{"input":[{"role":"user","content":"a b"},{"role":"user","content":[{"type":"input_text","text":"c"}]}],"max_output_tokens":1,"metadata":{"k":"v"},"store":false}`, hdr: reqID},
		{name: "responses_err_no_input", path: p, body: `{"model":"sim-model"}`},
		{name: "responses_err_unknown_previous", path: p, body: `{"input":"x","previous_response_id":"resp_nope"}`},
		{name: "responses_err_max_output_tokens", path: p, body: `{"input":"x","max_output_tokens":0}`},
		{name: "responses_err_background", path: p, body: `{"input":"x","background":true,"store":false}`},
		{name: "responses_get_unknown", method: "GET", path: p + "/resp_nope"},
		{name: "responses_cancel_unknown", path: p + "/resp_nope/cancel"},
		{name: "fault_responses_no_done", path: p, body: `{"input":"x","max_output_tokens":1,"stream":true}`, hdr: withFault("no-done")},
		{name: "fault_responses_stall_after_2", path: p, body: `{"input":"x","max_output_tokens":3,"stream":true}`, hdr: withFault("stall-after=2")},
		{name: "fault_responses_garbage_sse", path: p, body: `{"input":"x","max_output_tokens":1,"stream":true}`, hdr: withFault("garbage-sse")},
		{name: "fault_responses_truncated_json", path: p, body: `{"input":"x","max_output_tokens":1,"stream":true}`, hdr: withFault("truncated-json")},
		{name: "fault_responses_status_503", path: p, body: `{"input":"x","stream":true}`, hdr: withFault("status=503")},
	})
}

// A stored response can be read back and followed up on this instance;
// another instance does not know it; a finished response cannot be
// cancelled; store=false keeps nothing.
func TestResponsesLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := New(Config{TTFT: -1, ITL: -1}), New(Config{TTFT: -1, ITL: -1})
		created := serve(t.Context(), a, "POST", "/v1/responses", `{"input":"one two three","instructions":"x y","max_output_tokens":2}`, reqID)
		if created.Code != 200 || !strings.Contains(created.Body.String(), `"usage":{"input_tokens":5,`) {
			t.Fatalf("create: %d %s", created.Code, created.Body)
		}
		steps := []struct {
			s                *Server
			method, path     string
			body             string
			wantCode         int
			wantBodyContains string
		}{
			{a, "GET", "/v1/responses/resp_r1", "", 200, created.Body.String()},
			{a, "POST", "/v1/responses/resp_r1/cancel", "", 400, `{"error":{"message":"Cannot cancel a synchronous response.","type":"invalid_request_error","param":null,"code":400}}`},
			// The follow-up's input: 3 (previous input, instructions not carried) + 2 (previous output) + 1.
			{a, "POST", "/v1/responses", `{"input":"four","previous_response_id":"resp_r1","max_output_tokens":1}`, 200, `"previous_response_id":"resp_r1","prompt":null,"reasoning":null,"service_tier":"auto","status":"completed","text":null,"top_logprobs":null,"truncation":"disabled","usage":{"input_tokens":6,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}`},
			{b, "GET", "/v1/responses/resp_r1", "", 404, `{"error":{"message":"Response with id 'resp_r1' not found.","type":"invalid_request_error","param":null,"code":404}}`},
			{b, "POST", "/v1/responses", `{"input":"four","previous_response_id":"resp_r1"}`, 404, `{"error":{"message":"Response with id 'resp_r1' not found.","type":"invalid_request_error","param":null,"code":404}}`},
			{b, "POST", "/v1/responses/resp_r1/cancel", "", 404, `"code":404`},
			{a, "POST", "/v1/responses", `{"input":"x","store":false,"max_output_tokens":1}`, 200, `"id":"resp_s1"`},
			{a, "GET", "/v1/responses/resp_s1", "", 404, `Response with id 'resp_s1' not found.`},
		}
		for i, st := range steps {
			hdr := reqID
			if strings.Contains(st.body, `"store":false`) {
				hdr = map[string]string{"X-Request-Id": "s1"}
			} else if st.method == "POST" && st.path == "/v1/responses" {
				hdr = map[string]string{"X-Request-Id": "r2"}
			}
			rec := serve(t.Context(), st.s, st.method, st.path, st.body, hdr)
			if rec.Code != st.wantCode || !strings.Contains(rec.Body.String(), st.wantBodyContains) {
				t.Errorf("step %d: %s %s = %d %s; want %d containing %s", i, st.method, st.path, rec.Code, rec.Body, st.wantCode, st.wantBodyContains)
			}
		}
	})
}

// The store keeps the newest MaxStoredResponses responses.
func TestResponsesStoreBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: -1, ITL: -1, MaxStoredResponses: 2})
		for _, id := range []string{"a", "b", "c"} {
			serve(t.Context(), s, "POST", "/v1/responses", `{"input":"x","max_output_tokens":1}`, map[string]string{"X-Request-Id": id})
		}
		var got []int
		for _, id := range []string{"a", "b", "c"} {
			got = append(got, serve(t.Context(), s, "GET", "/v1/responses/resp_"+id, "", nil).Code)
		}
		if want := []int{404, 200, 200}; !slices.Equal(got, want) {
			t.Errorf("GET codes %v, want %v", got, want)
		}
	})
}
