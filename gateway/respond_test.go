package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

// scriptedBackend plays the consumer's part: on Publish it finds the
// request's Pending and sends it a fixed script of events.
type scriptedBackend struct {
	reg    *consume.Registry
	script []consume.Event
}

func (b *scriptedBackend) Publish(_ context.Context, m *consume.Message) error {
	p, _ := b.reg.Load(m.ID)
	p.MarkDispatched(time.Now())
	go func() {
		for _, ev := range b.script {
			if p.Send(ev) != nil {
				return
			}
		}
	}()
	return nil
}
func (b *scriptedBackend) Start(consume.Handler) error { return nil }
func (b *scriptedBackend) Close(context.Context) (consume.Leftover, error) {
	return consume.Leftover{}, nil
}
func (b *scriptedBackend) MinSuspend() time.Duration   { return 0 }
func (b *scriptedBackend) Ready(context.Context) error { return nil }

type onePool struct{}

func (onePool) Models() []string     { return []string{"m"} }
func (onePool) Serves(m string) bool { return m == "m" }
func (onePool) Ready() bool          { return true }

// serve runs one request through a Server whose consumer side is script.
func serve(t *testing.T, body string, script ...consume.Event) *httptest.ResponseRecorder {
	t.Helper()
	f, err := config.Parse([]byte("upstreams: [{url: \"http://127.0.0.1:1\"}]\ntenants: [{id: a, keys: [k]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	table, reg := policy.NewTable(q), &consume.Registry{}
	s := New(Config{
		Table: table, Admitter: policy.NewAdmitter(table), Pacer: policy.NewPacer(table),
		Buckets: consume.NewBuckets(), Registry: reg, Backend: &scriptedBackend{reg: reg, script: script},
		Pool: onePool{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewID: func() string { return "req-1" },
	})
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer k")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

const (
	streamReq = `{"model":"m","stream":true,"messages":[]}`
	jsonReq   = `{"model":"m","messages":[]}`
	usageOnly = `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
)

var header = consume.Event{Kind: consume.EventHeader, Status: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}}

func chunk(s string) consume.Event { return consume.Event{Kind: consume.EventChunk, Data: []byte(s)} }

func TestRespondStreamExactSequence(t *testing.T) {
	done := consume.Event{Kind: consume.EventDone}
	cases := []struct {
		name, body string
		script     []consume.Event
		status     int
		want       string
	}{
		{"usage chunk dropped when not asked", streamReq,
			[]consume.Event{header, chunk(`{"a":1}`), chunk(usageOnly), done}, 200,
			"data: {\"a\":1}\n\ndata: [DONE]\n\n"},
		{"usage chunk kept when asked", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`,
			[]consume.Event{header, chunk(`{"a":1}`), chunk(usageOnly), done}, 200,
			"data: {\"a\":1}\n\ndata: " + usageOnly + "\n\ndata: [DONE]\n\n"},
		{"error after the first byte is an event", streamReq,
			[]consume.Event{header, chunk(`{"a":1}`), {Kind: consume.EventError, Err: upstream.ErrStreamBroken}}, 200,
			"data: {\"a\":1}\n\ndata: {\"error\":{\"message\":\"The model server's stream broke off before it finished.\",\"type\":\"server_error\",\"param\":null,\"code\":\"upstream_error\"}}\n\n"},
		{"error before the first byte is a status", streamReq,
			[]consume.Event{{Kind: consume.EventError, Err: &upstream.StatusError{Status: 400, Body: []byte(`{"error":{"message":"too long","type":"BadRequestError","param":"messages","code":400}}`)}}}, 400,
			`{"error":{"message":"too long","type":"BadRequestError","param":"messages","code":null}}`},
		{"non-streamed body", jsonReq,
			[]consume.Event{{Kind: consume.EventHeader, Status: 200, Header: http.Header{"Content-Type": {"application/json"}}},
				{Kind: consume.EventBody, Data: []byte(`{"ok":true}`)}, done}, 200,
			`{"ok":true}`},
		{"non-streamed empty response is an error, not a silent 200", jsonReq,
			[]consume.Event{{Kind: consume.EventHeader, Status: 200}, done}, 502,
			`{"error":{"message":"The model server sent no response body.","type":"server_error","param":null,"code":"upstream_error"}}`},
		{"pool unavailable", jsonReq,
			[]consume.Event{{Kind: consume.EventError, Err: errors.Join(upstream.ErrUpstreamUnavailable)}}, 503,
			`{"error":{"message":"No model server could take the request.","type":"server_error","param":null,"code":"service_unavailable"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(t, tc.body, tc.script...)
			if w.Code != tc.status || w.Body.String() != tc.want {
				t.Errorf("got %d %q\nwant %d %q", w.Code, w.Body.String(), tc.status, tc.want)
			}
			if w.Header().Get("X-Request-Id") != "req-1" {
				t.Errorf("X-Request-Id = %q", w.Header().Get("X-Request-Id"))
			}
		})
	}
}
