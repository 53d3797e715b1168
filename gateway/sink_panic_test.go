package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

// outcomeRecorder keeps each request's outcome, and passes the rest to
// its Observer.
type outcomeRecorder struct {
	Observer
	mu       sync.Mutex
	outcomes []string
}

// recorded returns the outcomes so far.
func (o *outcomeRecorder) recorded() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.outcomes)
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
			obs := &outcomeRecorder{Observer: panicAtFirstByte{}}
			logger, buf := testLogger()
			r := newAPIRigWith(t, "", func(c *Config) { c.Observer, c.Logger = obs, logger }, tc.up)
			w := r.call("POST", "/v1/chat/completions", tc.body, "Authorization: Bearer ka")
			expect(t, w, http.StatusInternalServerError, internal)
			if got := obs.recorded(); len(got) != 1 || got[0] != OutcomeInternalError {
				t.Errorf("outcomes %q, want [%s]", got, OutcomeInternalError)
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

// A panic mid-stream ends the stream with an error event after the
// chunks already sent, never with a silent cut, and stops the upstream
// call: the chunk after it is never written. When the error's own write
// panics as well, the response ends without it and the process lives on,
// also when the call runs on a goroutine of its own, where no recoverer
// would catch a panic. Both with the call on the handler's goroutine
// (inline delivery) and on its own.
func TestAPanicMidStreamEndsWithAnErrorEvent(t *testing.T) {
	const first = "data: {\"a\":1}\n\n"
	const internal = "data: {\"error\":{\"message\":\"Internal error.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"
	for _, inline := range []bool{true, false} {
		for _, tc := range []struct {
			name   string
			always bool // the error's write panics too
			want   string
		}{{"once", false, first + internal}, {"always", true, first}} {
			t.Run(fmt.Sprintf("inline=%t/%s", inline, tc.name), func(t *testing.T) {
				r := newRigDelivering(t, 0, inline, header, chunk(`{"a":1}`), chunk(`{"boom":1}`), chunk(`{"c":1}`), consume.Event{Kind: consume.EventDone})
				defer r.close()
				logger, buf := testLogger()
				r.s.cfg.Logger = logger
				req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", strings.NewReader(streamReq))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer k")
				w := &panicWriter{ResponseRecorder: httptest.NewRecorder(), marker: "boom", always: tc.always}
				r.s.ServeHTTP(w, req)
				if w.Code != http.StatusOK || w.Body.String() != tc.want {
					t.Fatalf("got %d %q\nwant 200 %q", w.Code, w.Body.String(), tc.want)
				}
				if !strings.Contains(buf.String(), `"msg":"panic writing a response"`) || !strings.Contains(buf.String(), `"panic":"writer failed"`) {
					t.Errorf("log:\n%s", buf)
				}
			})
		}
	}
}

// panicWriter is a ResponseWriter whose first write containing marker
// panics (and, if always, every write after it): a bug met mid-stream,
// after the headers and a chunk went out.
type panicWriter struct {
	*httptest.ResponseRecorder
	marker string
	always bool
	failed bool
}

func (w *panicWriter) Write(p []byte) (int, error) {
	if (w.failed && w.always) || (!w.failed && strings.Contains(string(p), w.marker)) {
		w.failed = true
		panic("writer failed")
	}
	return w.ResponseRecorder.Write(p)
}

func (w *panicWriter) Flush() { w.ResponseRecorder.Flush() }
