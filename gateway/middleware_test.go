package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

type flushErrRW struct {
	http.ResponseWriter
	err error
}

func (f *flushErrRW) FlushError() error { return f.err }

// A flush through the status wrapper reaches the connection and brings
// its error back, as the SSE writer needs to see a vanished client.
func TestStatusWriterFlushReturnsTheConnectionsError(t *testing.T) {
	gone := errors.New("gone")
	sw := &statusWriter{ResponseWriter: &flushErrRW{ResponseWriter: httptest.NewRecorder(), err: gone}}
	if err := http.NewResponseController(sw).Flush(); !errors.Is(err, gone) {
		t.Fatalf("Flush = %v, want %v", err, gone)
	}
	rec := httptest.NewRecorder()
	sw = &statusWriter{ResponseWriter: rec}
	if err := http.NewResponseController(sw).Flush(); err != nil || !rec.Flushed {
		t.Fatalf("Flush over a recorder = %v, flushed %v", err, rec.Flushed)
	}
}

// logLines decodes the JSON lines a test logger wrote, without their
// time: under synctest every other field is exact.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

func testLogger() (*slog.Logger, *bytes.Buffer) {
	buf := new(bytes.Buffer)
	return slog.New(slog.NewJSONHandler(buf, nil)), buf
}

func seqIDs() func() string {
	n := 0
	return func() string { n++; return "req-" + string(rune('0'+n)) }
}

func TestRequestIDAlone(t *testing.T) {
	var seen []string
	h := requestID(seqIDs())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, requestIDFrom(r.Context()))
	}))
	for _, want := range []string{"req-1", "req-2"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		req.Header.Set("X-Request-Id", "client-chosen") // not trusted
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("X-Request-Id"); got != want {
			t.Fatalf("X-Request-Id = %q, want %q", got, want)
		}
	}
	if !reflect.DeepEqual(seen, []string{"req-1", "req-2"}) {
		t.Fatalf("ids in the context = %q", seen)
	}
	if id := requestIDFrom(context.Background()); id != "" {
		t.Fatalf("id outside the middleware = %q", id)
	}
}

// The recoverer alone: a panic before anything was sent gets the error
// writer's 500 and one error line; after the header it only logs; an
// abort goes on to net/http.
func TestRecovererAlone(t *testing.T) {
	logger, buf := testLogger()
	var gotPath string
	writeErr := func(w http.ResponseWriter, r *http.Request, e *APIError) {
		gotPath = r.URL.Path
		dialectAnthropic.writeError(w, e)
	}
	mw := recoverer(logger, writeErr)

	rec := httptest.NewRecorder()
	mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })).
		ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", nil))
	const want = `{"type":"error","error":{"type":"api_error","message":"Internal error."}}`
	if rec.Code != http.StatusInternalServerError || rec.Body.String() != want || gotPath != "/v1/messages" {
		t.Fatalf("panic before writing: %d %s (writer saw %q)", rec.Code, rec.Body, gotPath)
	}
	lines := logLines(t, buf)
	if len(lines) != 1 || lines[0]["msg"] != "panic serving request" || lines[0]["panic"] != "boom" ||
		!strings.Contains(lines[0]["stack"].(string), "TestRecovererAlone") {
		t.Fatalf("log: %v", lines)
	}

	buf.Reset()
	rec = httptest.NewRecorder()
	mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("partial"))
		panic("late")
	})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "partial" || len(logLines(t, buf)) != 1 {
		t.Fatalf("panic after writing: %d %q, log %s", rec.Code, rec.Body, buf)
	}

	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("abort: recovered %v, want http.ErrAbortHandler", v)
		}
	}()
	mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
}

// The access log alone: one line per request with the handler's fields,
// and a line for a panic that passes through it too.
func TestAccessLogAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger, buf := testLogger()
		mw := accessLog(logger)
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e := accessEntryFrom(r.Context())
			e.tenant, e.model, e.outcome = "acme", "m", "ok"
			e.queueWait, e.ttft = 2*time.Second, 3*time.Second
			time.Sleep(5 * time.Second)
			w.WriteHeader(http.StatusCreated)
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil))
		func() {
			defer func() {
				if v := recover(); v != "boom" {
					t.Errorf("the panic did not pass through: %v", v)
				}
			}()
			mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })).
				ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/models", nil))
		}()
		want := []map[string]any{
			{"level": "INFO", "msg": "request", "request_id": "", "method": "POST", "path": "/v1/chat/completions",
				"status": 201.0, "duration": 5e9, "tenant": "acme", "model": "m", "queue_wait": 2e9, "ttft": 3e9, "outcome": "ok"},
			{"level": "INFO", "msg": "request", "request_id": "", "method": "GET", "path": "/v1/models",
				"status": 500.0, "duration": 0.0, "panic": true},
		}
		if got := logLines(t, buf); !reflect.DeepEqual(got, want) {
			t.Fatalf("access log:\n got %v\nwant %v", got, want)
		}
	})
}

// panicPool panics when asked for its models: a bug in a handler.
type panicPool struct{ onePool }

func (panicPool) Models() []string { panic("pool bug") }

// A request that panics through the whole Server gets the recoverer's
// 500 and an access log line with it, its id and its duration.
func TestServerLogsAPanickingRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := config.Parse([]byte("upstreams: [{url: \"http://127.0.0.1:1\"}]\ntenants: [{id: a, keys: [k]}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		q, err := f.Quotas()
		if err != nil {
			t.Fatal(err)
		}
		logger, buf := testLogger()
		table := policy.NewTable(q)
		s := New(Config{Table: table, Admitter: policy.NewAdmitter(table), Pacer: policy.NewPacer(table),
			Pool: panicPool{}, Logger: logger, NewID: func() string { return "req-1" }})
		req := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		req.Header.Set("Authorization", "Bearer k")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		const body = `{"error":{"message":"Internal error.","type":"server_error","param":null,"code":null}}`
		if rec.Code != http.StatusInternalServerError || rec.Body.String() != body || rec.Header().Get("X-Request-Id") != "req-1" {
			t.Fatalf("got %d %s, X-Request-Id %q", rec.Code, rec.Body, rec.Header().Get("X-Request-Id"))
		}
		lines := logLines(t, buf)
		if len(lines) != 2 || lines[0]["msg"] != "panic serving request" || lines[0]["request_id"] != "req-1" {
			t.Fatalf("log: %v", lines)
		}
		want := map[string]any{"level": "INFO", "msg": "request", "request_id": "req-1", "method": "GET",
			"path": "/v1/models", "status": 500.0, "duration": 0.0}
		if !reflect.DeepEqual(lines[1], want) {
			t.Fatalf("access log line:\n got %v\nwant %v", lines[1], want)
		}
	})
}
