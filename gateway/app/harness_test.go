package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy/config"
)

const (
	adminToken = "adm-test-token"
	simModel   = "sim-model"
)

// syncBuffer is a log sink the test reads while the app writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testApp is a running App in front of a simulated vLLM, with its admin
// listener on an ephemeral port.
type testApp struct {
	t    *testing.T
	a    *App
	sim  *vllmsim.Server
	up   *arrivalLog
	logs *syncBuffer
}

// arrivalLog records when each generation request reaches the simulated
// vLLM, the instant the gateway's pacing is observable from outside.
type arrivalLog struct {
	h  http.Handler
	mu sync.Mutex
	at []time.Time
}

func (l *arrivalLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		l.mu.Lock()
		l.at = append(l.at, time.Now())
		l.mu.Unlock()
	}
	l.h.ServeHTTP(w, r)
}

// arrivals returns a copy of the arrival instants so far, in order.
func (ta *testApp) arrivals() []time.Time {
	ta.up.mu.Lock()
	defer ta.up.mu.Unlock()
	return append([]time.Time(nil), ta.up.at...)
}

// startApp runs the app with body appended to a config that sets the
// listeners and the upstream.
func startApp(t *testing.T, simCfg vllmsim.Config, body string) *testApp {
	t.Helper()
	sim := vllmsim.New(simCfg)
	return startAppBehind(t, sim, sim, body)
}

// startAppBehind is startApp with the upstream served by h, which fronts
// sim (h may be sim itself).
func startAppBehind(t *testing.T, sim *vllmsim.Server, h http.Handler, body string) *testApp {
	t.Helper()
	up := &arrivalLog{h: h}
	ts := httptest.NewServer(up)
	t.Cleanup(ts.Close)
	cfg := parse(t, configText(ts.URL, body))
	ta := &testApp{t: t, sim: sim, up: up, logs: new(syncBuffer)}
	a, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(ta.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ta.a = a
	t.Cleanup(func() { _ = a.Shutdown(context.Background(), 0, time.Second) })
	return ta
}

func configText(simURL, body string) string {
	return fmt.Sprintf("listen: \"127.0.0.1:0\"\nadmin: {listen: \"127.0.0.1:0\", token: %q}\nupstreams: [{url: %q}]\n%s", adminToken, simURL, body)
}

func parse(t testing.TB, y string) *config.File {
	t.Helper()
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, y)
	}
	return cfg
}

// chat sends a non-streamed chat completion and returns status and body.
func (ta *testApp) chat(ctx context.Context, key string) (int, string) {
	return ta.complete(ctx, key, false)
}

// stream sends a streamed chat completion and returns its whole body.
func (ta *testApp) stream(key string) (int, string) {
	return ta.complete(context.Background(), key, true)
}

func (ta *testApp) complete(ctx context.Context, key string, stream bool) (int, string) {
	body := fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, simModel, stream)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ta.a.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// admin sends an authenticated admin request.
func (ta *testApp) admin(method, path, body string) (int, string) {
	ta.t.Helper()
	req, _ := http.NewRequest(method, "http://"+ta.a.AdminAddr()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ta.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// get sends a GET with the key sk-acme on a new connection, so that an
// answer also shows that the listener accepts.
func (ta *testApp) get(path string) (int, string) {
	ta.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ta.a.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer sk-acme")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		ta.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond: the queue drains on the app's goroutines, which
// the test cannot synchronise with.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// result is one finished request.
type result struct {
	status int
	body   string
}

// fire sends n requests concurrently; results arrive on the channel.
func (ta *testApp) fire(n int, key string) <-chan result {
	out := make(chan result, n)
	for range n {
		go func() {
			code, body := ta.chat(context.Background(), key)
			out <- result{code, body}
		}()
	}
	return out
}

func fastSim() vllmsim.Config {
	return vllmsim.Config{Models: []string{simModel}, TTFT: time.Millisecond, ITL: time.Millisecond}
}

// startSim serves a fast simulated vLLM and returns its URL.
func startSim(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(vllmsim.New(fastSim()))
	t.Cleanup(ts.Close)
	return ts.URL
}
