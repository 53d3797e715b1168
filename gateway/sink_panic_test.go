package gateway

import (
	"net/http"
	"sync"
	"testing"
)

// outcomeRecorder is panicAtFirstByte that also keeps each request's
// outcome.
type outcomeRecorder struct {
	panicAtFirstByte
	mu       sync.Mutex
	outcomes []string
}

func (o *outcomeRecorder) Request(_, _, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, outcome)
}

// A panic of the gateway's own code while it writes a response runs on
// the upstream call's goroutine, out of the recoverer's reach: the sink
// answers it as the recoverer would (a 500 in the path's shape, logged
// with the request id), counts it as internal_error, and the upstream is
// not blamed, for a JSON answer and for a stream alike.
func TestAPanicWritingAResponseIsAnInternalError(t *testing.T) {
	const internal = `{"error":{"message":"Internal error.","type":"server_error","param":null,"code":null}}`
	for _, tc := range []struct {
		name, body string
		up         http.HandlerFunc
	}{
		{"json", `{"model":"m","messages":[]}`, jsonBody(200, `{}`)},
		{"stream", `{"model":"m","messages":[],"stream":true}`, sseBody("data: {}\n\ndata: [DONE]\n\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &outcomeRecorder{}
			logger, buf := testLogger()
			r := newAPIRigWith(t, "", func(c *Config) { c.Observer, c.Logger = obs, logger }, tc.up)
			w := r.call("POST", "/v1/chat/completions", tc.body, "Authorization: Bearer ka")
			expect(t, w, http.StatusInternalServerError, internal)
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if len(obs.outcomes) != 1 || obs.outcomes[0] != OutcomeInternalError {
				t.Errorf("outcomes %q, want [%s]", obs.outcomes, OutcomeInternalError)
			}
			var panics int
			for _, l := range logLines(t, buf) {
				if l["msg"] == "panic writing a response" {
					panics++
					if l["request_id"] != w.Header().Get("X-Request-Id") || l["panic"] != "observer failed" || l["stack"] == "" {
						t.Errorf("log line %v", l)
					}
				}
			}
			if panics != 1 {
				t.Errorf("%d panic log lines, want 1:\n%s", panics, buf)
			}
		})
	}
}
