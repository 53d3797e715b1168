package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

const responsesStream = "event: response.created\n" +
	`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","usage":null}}` + "\n\n" +
	": keep-alive\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":1,"delta":"tok0"}` + "\n\n" +
	"event: response.output_text.delta\n" +
	`data: {"type":"response.output_text.delta","sequence_number":2,"delta":" tok1"}` + "\n\n" +
	"event: response.completed\n" +
	`data: {"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","object":"response","status":"completed","usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}}` + "\n\n"

// The named events pass through unchanged (the upstream's own comments
// are not relayed), with no [DONE]; the usage on response.completed
// settles the reservation.
func TestResponsesStreamExact(t *testing.T) {
	r := newAPIRig(t, "{tpm: 1000}", sseBody(responsesStream))
	w := r.call("POST", "/v1/responses", `{"model":"m","input":"hello","max_output_tokens":50,"stream":true}`, "Authorization: Bearer ka")
	want := strings.ReplaceAll(responsesStream, ": keep-alive\n\n", "")
	expect(t, w, 200, want)
	expectHeader(t, w, "Content-Type", "text/event-stream")
	// Reserved: "hello" (2) + 50; charged 7. The next reservation (52)
	// shows what is left.
	w = r.call("POST", "/v1/responses", `{"model":"m","input":"hello","max_output_tokens":50,"stream":true}`, "Authorization: Bearer ka")
	expectHeader(t, w, "x-ratelimit-remaining-tokens", fmt.Sprint(1000-7-52))
}

// A stream cut short is charged what it produced: the prompt estimate and
// the deltas streamed; the client gets an error event it raises on.
func TestResponsesStreamCutShort(t *testing.T) {
	cut := strings.SplitAfter(responsesStream, "\"delta\":\"tok0\"}\n\n")[0]
	r := newAPIRig(t, "{tpm: 1000}", sseBody(cut))
	w := r.call("POST", "/v1/responses", `{"model":"m","input":"hello","max_output_tokens":50,"stream":true}`, "Authorization: Bearer ka")
	want := strings.ReplaceAll(cut, ": keep-alive\n\n", "") + "event: error\n" +
		`data: {"type":"error","code":"upstream_error","message":"The model server's stream was malformed (not JSON, or it ended before its last event).","param":null,"error":{"message":"The model server's stream was malformed (not JSON, or it ended before its last event).","type":"server_error","param":null,"code":"upstream_error"}}` + "\n\n"
	expect(t, w, 200, want)
	w = r.call("POST", "/v1/responses", `{"model":"m","input":"hello","max_output_tokens":50}`, "Authorization: Bearer ka")
	expectHeader(t, w, "x-ratelimit-remaining-tokens", fmt.Sprint(1000-(2+1)-52))
}

// A stored response is followed up on the upstream that made it, and
// only by the tenant that made it: another tenant's probe is a 404 that
// does not reveal the id exists.
func TestResponsesAffinityAndCrossTenant(t *testing.T) {
	answer := func(id string) http.HandlerFunc {
		return byPath(map[string]http.HandlerFunc{
			"POST /v1/responses":                   jsonBody(200, `{"id":"`+id+`","object":"response","status":"completed","usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}`),
			"GET /v1/responses/" + id:              jsonBody(200, `{"id":"`+id+`","object":"response","status":"completed"}`),
			"POST /v1/responses/" + id + "/cancel": jsonBody(200, `{"id":"`+id+`","object":"response","status":"cancelled"}`),
		})
	}
	r := newAPIRig(t, "", answer("resp_A"), answer("resp_B"))
	w := r.call("POST", "/v1/responses", `{"model":"m","input":"hi"}`, "Authorization: Bearer ka")
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	id, home, other := "resp_A", r.ups[0], r.ups[1]
	if strings.Contains(w.Body.String(), "resp_B") {
		id, home, other = "resp_B", r.ups[1], r.ups[0]
	}
	for i := range 3 { // follow-ups never move, however the pool rotates
		w = r.call("GET", "/v1/responses/"+id, "", "Authorization: Bearer ka")
		expect(t, w, 200, `{"id":"`+id+`","object":"response","status":"completed"}`)
		w = r.call("POST", "/v1/responses", fmt.Sprintf(`{"model":"m","input":"more %d","previous_response_id":%q}`, i, id), "Authorization: Bearer ka")
		if w.Code != 200 {
			t.Fatalf("follow-up: %d %s", w.Code, w.Body)
		}
	}
	w = r.call("POST", "/v1/responses/"+id+"/cancel", "", "Authorization: Bearer ka")
	expect(t, w, 200, `{"id":"`+id+`","object":"response","status":"cancelled"}`)
	// A streamed retrieval answered with JSON (the response is finished)
	// is passed on as JSON, query and all.
	w = r.call("GET", "/v1/responses/"+id+"?stream=true", "", "Authorization: Bearer ka")
	expect(t, w, 200, `{"id":"`+id+`","object":"response","status":"completed"}`)
	expectHeader(t, w, "Content-Type", "application/json")
	if got := home.seen()[8]; got.Path != "/v1/responses/"+id+"?stream=true" || got.Method != "GET" || got.ContentType != "" {
		t.Errorf("streamed retrieval reached the upstream as %+v", got)
	}
	if n := len(other.seen()); n != 0 {
		t.Errorf("the other upstream got %d requests: %+v", n, other.seen())
	}
	if n := len(home.seen()); n != 9 {
		t.Errorf("home upstream got %d requests, want 9", n)
	}

	notFound := `{"error":{"message":"Response with id '` + id + `' not found.","type":"invalid_request_error","param":"response_id","code":"not_found"}}`
	expect(t, r.call("GET", "/v1/responses/"+id, "", "Authorization: Bearer kb"), 404, notFound)
	expect(t, r.call("POST", "/v1/responses/"+id+"/cancel", "", "Authorization: Bearer kb"), 404, notFound)
	expect(t, r.call("POST", "/v1/responses", `{"model":"m","input":"x","previous_response_id":"`+id+`"}`, "Authorization: Bearer kb"), 404,
		`{"error":{"message":"Response with id '`+id+`' not found.","type":"invalid_request_error","param":"previous_response_id","code":"not_found"}}`)
	expect(t, r.call("GET", "/v1/responses/resp_never", "", "Authorization: Bearer ka"), 404,
		`{"error":{"message":"Response with id 'resp_never' not found.","type":"invalid_request_error","param":"response_id","code":"not_found"}}`)
	if n := len(home.seen()); n != 9 {
		t.Errorf("a refused probe reached the upstream: %d requests", n)
	}
}

// The upstream holding a stored response is down: 503 with Retry-After,
// since it may come back with its memory; nothing goes elsewhere.
func TestResponsesPinnedUpstreamDown(t *testing.T) {
	var down atomic.Bool
	h := func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			jsonBody(503, `{"error":{"message":"engine dead","type":"InternalServerError","param":null,"code":503}}`)(w, r)
			return
		}
		jsonBody(200, `{"id":"resp_Z","object":"response","usage":{"input_tokens":1,"output_tokens":1}}`)(w, r)
	}
	r := newAPIRig(t, "", h)
	if w := r.call("POST", "/v1/responses", `{"model":"m","input":"hi"}`, "Authorization: Bearer ka"); w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	down.Store(true)
	// The first follow-up finds the upstream failing (503 passed on as
	// the pool's unavailability); it is then marked down, and the next
	// is refused without calling it.
	r.call("GET", "/v1/responses/resp_Z", "", "Authorization: Bearer ka")
	w := r.call("GET", "/v1/responses/resp_Z", "", "Authorization: Bearer ka")
	expect(t, w, 503, `{"error":{"message":"The model server that stored response 'resp_Z' is unavailable; retry shortly.","type":"server_error","param":null,"code":"service_unavailable"}}`)
	expectHeader(t, w, "Retry-After", "1")
	if n := len(r.ups[0].seen()); n != 2 {
		t.Errorf("upstream saw %d requests, want 2 (create, first follow-up)", n)
	}
}
