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
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

// scriptedUpstreams is a pool of one upstream, always free, that answers
// every request with a fixed script of events: all but the last are
// emitted, and the last ends the call (EventDone: success, EventError: its
// error). block, if set, is waited for (or the request's end) before the
// script runs.
type scriptedUpstreams struct {
	script []consume.Event
	block  chan struct{}
	// hang, if set, makes the call wait for its context after the script
	// instead of ending with its last event.
	hang bool
	// full, if set, is a pool with no free slot.
	full bool
	// ended receives the error each call returned.
	ended chan error
}

func (u *scriptedUpstreams) TryAcquire(string) (consume.Slot, bool)           { return scriptedSlot{u}, !u.full }
func (u *scriptedUpstreams) TryAcquireHeadroom(m string) (consume.Slot, bool) { return u.TryAcquire(m) }
func (u *scriptedUpstreams) OnFree(func([]string))                            {}
func (u *scriptedUpstreams) Free(string) (int, int)                           { return 1, 1 }

type scriptedSlot struct{ u *scriptedUpstreams }

func (s scriptedSlot) Release() {}
func (s scriptedSlot) Do(ctx context.Context, _ *consume.Request, emit consume.Emitter) (err error) {
	if s.u.ended != nil {
		defer func() { s.u.ended <- err }()
	}
	if s.u.block != nil {
		select {
		case <-s.u.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	script := s.u.script
	for _, ev := range script[:len(script)-1] {
		if err := emit.Emit(ev); err != nil {
			return err
		}
	}
	if s.u.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return script[len(script)-1].Err
}

type onePool struct{}

func (onePool) Models() []string     { return []string{"m"} }
func (onePool) Serves(m string) bool { return m == "m" }
func (onePool) Ready() bool          { return true }

// rig is a Server over the real queue, engine and consumer, with a
// scripted upstream.
type rig struct {
	s  *Server
	up *scriptedUpstreams
	e  *embedded.Engine
	c  *consume.Consumer
}

func newRig(t *testing.T, timeout time.Duration, script ...consume.Event) *rig {
	t.Helper()
	return newRigDelivering(t, timeout, true, script...)
}

// newRigDelivering is newRig with inline delivery on or off: off, every
// upstream call runs on a goroutine of its own, as a request delivered by
// a worker or by RocketMQ does.
func newRigDelivering(t *testing.T, timeout time.Duration, inline bool, script ...consume.Event) *rig {
	t.Helper()
	f, err := config.Parse([]byte("upstreams: [{url: \"http://127.0.0.1:1\"}]\ntenants: [{id: a, keys: [k]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	table := policy.NewTable(q)
	pacer := policy.NewPacer(table)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Inline delivery, as the app runs the engine: a stream's upstream call
	// then runs on the handler's goroutine (see consume.Pending.handOff).
	r := &rig{up: &scriptedUpstreams{script: script}, e: embedded.New(embedded.Config{Logger: quiet, InlineDelivery: inline})}
	queue := consume.NewQueue(r.e, "")
	r.c = consume.NewConsumer(consume.ConsumerConfig{Queue: queue, Pacer: pacer, Upstreams: r.up, Logger: quiet})
	if err := r.e.Start(r.c.Handle); err != nil {
		t.Fatal(err)
	}
	r.s = New(Config{
		Table: table, Admitter: policy.NewAdmitter(table), Pacer: pacer, Queue: queue,
		Pool: onePool{}, Logger: quiet, RequestTimeout: timeout,
		NewID: func() string { return "req-1" },
	})
	return r
}

func (r *rig) close() {
	r.e.Close(context.Background())
	r.c.Close(context.Background())
}

func (r *rig) do(ctx context.Context, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	w := httptest.NewRecorder()
	r.s.ServeHTTP(w, req)
	return w
}

// serve runs one request through a Server whose upstream answers script.
func serve(t *testing.T, body string, script ...consume.Event) *httptest.ResponseRecorder {
	t.Helper()
	r := newRig(t, 0, script...)
	defer r.close()
	return r.do(context.Background(), body)
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
