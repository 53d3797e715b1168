package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
	"github.com/pacegate/pacegate/policy/policytest"
)

// apiRig is a Server over the real queue, consumer and upstream pool, in
// front of scripted HTTP upstreams: it exercises the relay too.
type apiRig struct {
	t    *testing.T
	s    *Server
	pool *upstream.Pool
	ups  []*scriptUpstream
}

// scriptUpstream is an HTTP upstream that answers with its handler and
// logs what reached it.
type scriptUpstream struct {
	url string
	mu  sync.Mutex
	got []seenRequest
}

type seenRequest struct {
	Method, Path, ContentType, Body, Version string
}

func (u *scriptUpstream) seen() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.got...)
}

// newAPIRig starts the handlers as upstreams serving model "m", with
// limits (a YAML flow map, e.g. "{tpm: 100}") for every tenant; tenants
// a and b have keys ka and kb.
func newAPIRig(t *testing.T, limits string, handlers ...http.HandlerFunc) *apiRig {
	t.Helper()
	return newAPIRigWith(t, limits, nil, handlers...)
}

// newAPIRigWith is newAPIRig with the Server's config adjusted by mod.
func newAPIRigWith(t *testing.T, limits string, mod func(*Config), handlers ...http.HandlerFunc) *apiRig {
	t.Helper()
	r := &apiRig{t: t}
	var ucs []upstream.UpstreamConfig
	for _, h := range handlers {
		u := &scriptUpstream{}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			b, _ := io.ReadAll(req.Body)
			u.mu.Lock()
			u.got = append(u.got, seenRequest{req.Method, req.URL.RequestURI(), req.Header.Get("Content-Type"), string(b), req.Header.Get("Anthropic-Version")})
			u.mu.Unlock()
			h(w, req)
		}))
		t.Cleanup(ts.Close)
		u.url = ts.URL
		r.ups = append(r.ups, u)
		ucs = append(ucs, upstream.UpstreamConfig{URL: ts.URL, Models: []string{"m"}, MaxConcurrency: 1})
	}
	yaml := "upstreams: [{url: \"http://127.0.0.1:1\"}]\ntenants: [{id: a, keys: [ka]}, {id: b, keys: [kb]}]\n"
	if limits != "" {
		yaml += "defaults: " + limits + "\n"
	}
	f, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.pool, err = upstream.NewPool(upstream.Config{Upstreams: ucs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.pool.Close)
	table := policy.NewTable(q)
	pacer := policy.NewPacer(table)
	e := embedded.New(embedded.Config{Logger: quiet})
	queue := consume.NewQueue(e, "")
	c := consume.NewConsumer(consume.ConsumerConfig{Queue: queue, Pacer: pacer, Upstreams: r.pool, Logger: quiet})
	if err := e.Start(c.Handle); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close(context.Background())
		c.Close(context.Background())
	})
	cfg := Config{Table: table, Admitter: policy.NewAdmitter(table), Pacer: pacer, Queue: queue,
		Pool: r.pool, Logger: quiet, RequestTimeout: 5 * time.Second, NewID: func() string { return "req-1" }}
	if mod != nil {
		mod(&cfg)
	}
	r.s = New(cfg)
	// A rig's test counts its calls against the caps (a 429 after the
	// limit, what is left after a charge) and takes well under a second.
	policytest.InOneWindow(t, 3*time.Second)
	return r
}

// call sends a request with the headers given as "Name: value" pairs.
func (r *apiRig) call(method, path, body string, headers ...string) *httptest.ResponseRecorder {
	r.t.Helper()
	req := httptest.NewRequestWithContext(r.t.Context(), method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	r.s.ServeHTTP(w, req)
	return w
}

// sseBody answers with a fixed event stream.
func sseBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}
}

// jsonBody answers with a fixed status and JSON body.
func jsonBody(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// byPath answers each path with its handler, anything else with
// FastAPI's 404.
func byPath(m map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h, ok := m[r.Method+" "+r.URL.Path]; ok {
			h(w, r)
			return
		}
		jsonBody(404, `{"detail":"Not Found"}`)(w, r)
	}
}

func expect(t *testing.T, w *httptest.ResponseRecorder, status int, body string) {
	t.Helper()
	if w.Code != status || w.Body.String() != body {
		t.Errorf("got %d %s\nwant %d %s", w.Code, w.Body.String(), status, body)
	}
}

func expectHeader(t *testing.T, w *httptest.ResponseRecorder, name, want string) {
	t.Helper()
	if got := w.Header().Get(name); got != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}
