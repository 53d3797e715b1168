package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/gateway/app"
	"github.com/pacegate/pacegate/policy/config"
)

const (
	legitKey   = "sk-legit-5b2e91d07c"
	faultyKey  = "sk-faulty-a81f3c66e4"
	adminToken = "adm-token-0c9d4e7b1a"

	// Timeouts of the suite's gateway, short so that the fast suite is.
	idleTimeout       = time.Second
	writeStallTimeout = time.Second
	readHeaderTimeout = time.Second
	readBodyTimeout   = time.Second
	maxBodyBytes      = 64 << 10
	// maxConnections is the default, above the largest slowloris flood:
	// every hostile connection is served and cut by a timeout, none left
	// in the accept queue.
	maxConnections = 10000
)

// Markers in a prompt that make the simulators misbehave (simFaults).
const (
	markStall     = "FAULT-STALL"
	markGarbage   = "FAULT-GARBAGE"
	markTruncated = "FAULT-TRUNCATED"
	markNoDone    = "FAULT-NODONE"
	markSlow      = "FAULT-SLOWHEADERS"

	// slowHeaders is how long the simulators hold back the headers of a
	// markSlow request: longer than idleTimeout, which starts only after
	// the headers.
	slowHeaders = 1500 * time.Millisecond
)

var simFaults = []vllmsim.FaultRule{
	{Match: markStall, Fault: vllmsim.Fault{Stall: true, StallAfter: 2}},
	{Match: markGarbage, Fault: vllmsim.Fault{GarbageSSE: true}},
	{Match: markTruncated, Fault: vllmsim.Fault{TruncatedJSON: true}},
	{Match: markNoDone, Fault: vllmsim.Fault{NoDone: true}},
	{Match: markSlow, Fault: vllmsim.Fault{SlowHeaders: slowHeaders}},
}

// harness is a gateway in front of two simulators, over loopback sockets.
// A scenario marked proc runs against proc, the same gateway as an OS
// process of its own in front of the same simulators, instead.
type harness struct {
	t      testing.TB // the running (sub)test
	root   testing.TB // the test that owns the harness: its cleanups outlive subtests
	app    *app.App
	sims   []*vllmsim.Server
	srvs   []*httptest.Server // the simulators' servers (restartSim replaces them)
	url    string
	logs   *syncBuffer // every log line of the gateway, JSON
	client *http.Client
	proc   *gatewayProc // nil until startProc
	retry  bool         // stream retries what a restart refuses (restartGateway)
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, root: t, logs: &syncBuffer{}}
	for range 2 {
		s := vllmsim.New(vllmsim.Config{TTFT: 5 * time.Millisecond, ITL: -1, MaxModelLen: 1 << 20, Faults: simFaults})
		ts, err := h.serveSim(s, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h.sims = append(h.sims, s)
		h.srvs = append(h.srvs, ts)
	}
	yaml := h.gatewayYAML("127.0.0.1:0")
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	logger := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.app, err = app.New(cfg, app.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.app.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.app.Shutdown(context.Background(), 0, 5*time.Second)
		cancel()
	})
	h.url = h.app.URL()
	// The hang guard: a request the gateway never ends counts as lost.
	h.client = &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	t.Cleanup(h.client.CloseIdleConnections)
	return h
}

// gatewayYAML is the config of the suite's gateways, listening on listen.
func (h *harness) gatewayYAML(listen string) string {
	var ups strings.Builder
	for _, ts := range h.srvs {
		fmt.Fprintf(&ups, "  - {url: %q, idle_timeout: %s}\n", ts.URL, idleTimeout)
	}
	return fmt.Sprintf(`listen: %q
admin: {listen: "127.0.0.1:0", token: %q}
server:
  read_header_timeout: %s
  read_body_timeout: %s
  write_stall_timeout: %s
  max_body_bytes: %d
  max_connections: %d
  request_timeout: 60s
  shutdown_delay: 0s
  shutdown_grace: 10s
upstreams:
%sdefaults: {rate: .inf, backlog: 10000}
tenants:
  - {id: legit, keys: [%q]}
  - {id: faulty, keys: [%q]}
`, listen, adminToken, readHeaderTimeout, readBodyTimeout, writeStallTimeout, maxBodyBytes, maxConnections,
		ups.String(), legitKey, faultyKey)
}

// serveSim serves s on addr ("127.0.0.1:0": any port) until the
// harness's test ends (restartUpstream closes it earlier).
func (h *harness) serveSim(s *vllmsim.Server, addr string) (*httptest.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ts := httptest.NewUnstartedServer(s)
	_ = ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	h.root.Cleanup(ts.Close)
	return ts, nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// chatBody is a streamed chat request whose prompt is content.
func chatBody(content string, maxTokens int) string {
	return fmt.Sprintf(`{"model":"sim-model","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":%q}]}`,
		maxTokens, content)
}

// result is how one request ended, as its client saw it.
type result struct {
	// class is "ok" (a stream ending with [DONE]), "error:<code>" (an
	// explicit OpenAI error, as a status or a final data event),
	// "timeout", "4xx:<status>", "cut" (a connection the gateway closed
	// on a hostile client) or "lost:<why>" (anything else).
	class   string
	ttft    time.Duration // to the first data event; 0 if none
	body    string        // the error body, if any
	retries int           // tries refused by a restarting gateway (harness.retry)
}

func (r result) lost() bool { return strings.HasPrefix(r.class, "lost") }

// stream sends a streamed chat request and classifies its end. With
// h.retry it retries, for up to 20 s, what a restarting gateway refuses
// before admitting it: a refused or reset connection with no response,
// and a 503 (shutting down); res.retries counts them.
func (h *harness) stream(key, body string) result {
	deadline := time.Now().Add(20 * time.Second)
	for retries := 0; ; retries++ {
		r, again := h.streamOnce(key, body)
		r.retries = retries
		if !h.retry || !again || time.Now().After(deadline) {
			return r
		}
		time.Sleep(50 * time.Millisecond) // back off while the gateway restarts
	}
}

// streamOnce is one try of stream; again says a retry is safe: the
// gateway answered nothing or a 503 before the stream.
func (h *harness) streamOnce(key, body string) (res result, again bool) {
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return result{class: "lost:" + err.Error()}, false
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	start := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		return result{class: "lost:" + err.Error()}, !isTimeout(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return classifyStatus(resp.StatusCode, b), resp.StatusCode == http.StatusServiceUnavailable
	}
	return readStream(resp.Body, start), false
}

func classifyStatus(status int, body []byte) result {
	code := errorCode(body)
	switch {
	case code == "":
		return result{class: fmt.Sprintf("lost:status %d without an OpenAI error", status), body: string(body)}
	case status == http.StatusGatewayTimeout:
		return result{class: "timeout", body: string(body)}
	case status >= 400 && status < 500:
		return result{class: fmt.Sprintf("4xx:%d", status), body: string(body)}
	}
	return result{class: "error:" + code, body: string(body)}
}

// readStream reads SSE to its end: [DONE] is "ok", a final error event
// is explicit, anything else is lost.
func readStream(r io.Reader, start time.Time) result {
	var res result
	var last string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if res.ttft == 0 {
			res.ttft = time.Since(start)
		}
		last = data
	}
	switch {
	case sc.Err() != nil:
		res.class = "lost:read: " + sc.Err().Error()
	case last == "[DONE]":
		res.class = "ok"
	case errorCode([]byte(last)) == "timeout":
		res.class, res.body = "timeout", last
	case errorCode([]byte(last)) != "":
		res.class, res.body = "error:"+errorCode([]byte(last)), last
	default:
		res.class = "lost:the stream ended without [DONE] or an error"
	}
	return res
}

// errorCode is the code of an OpenAI error body ("" if it is not one; a
// null code reads as "null").
func errorCode(b []byte) string {
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" {
		return ""
	}
	if e.Error.Code == nil {
		return "null"
	}
	return *e.Error.Code
}

// tally counts results by class.
type tally map[string]int

func (t tally) add(r result) { t[r.class]++ }

func (t tally) total() int {
	n := 0
	for _, c := range t {
		n += c
	}
	return n
}

func (t tally) lost() int {
	n := 0
	for class, c := range t {
		if strings.HasPrefix(class, "lost") {
			n += c
		}
	}
	return n
}

func (t tally) String() string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", k, t[k])
	}
	return b.String()
}

// parallel runs f(i) for i in [0,n) on at most width goroutines, and
// returns once all are done.
func parallel(n, width int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// legitLoad is a legitimate tenant's steady traffic: workers each send a
// short stream every period until stop, which returns what they saw.
type legitLoad struct {
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []result
}

func (h *harness) startLegit(workers int, period time.Duration) *legitLoad {
	l := &legitLoad{stopc: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				r := h.stream(legitKey, chatBody("a legitimate question", 8))
				l.mu.Lock()
				l.results = append(l.results, r)
				l.mu.Unlock()
				select {
				case <-l.stopc:
					return
				case <-tick.C:
				}
			}
		}()
	}
	return l
}

// stop ends the load, waits for its workers, and returns their results.
func (l *legitLoad) stop() []result {
	close(l.stopc)
	l.wg.Wait()
	return l.results
}

// heapPeak samples the Go heap in use every 20 ms until stop, which
// returns the peak in bytes.
func heapPeak() (stop func() uint64) {
	done := make(chan struct{})
	peak := make(chan uint64, 1)
	go func() {
		var m runtime.MemStats
		var max uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			max = maxU(max, m.HeapInuse)
			select {
			case <-done:
				peak <- max
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-peak }
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// eventually polls cond until it holds; within only guards against a
// hang (the state it waits for changes in the server, which the test
// cannot synchronise with).
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settled waits until no request is in flight anywhere and every upstream
// is healthy again, so that scenarios do not leak into each other.
func (h *harness) settled() {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second) // a hang guard, as in eventually
	for why := h.busy(); why != ""; why = h.busy() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after 15s waiting for the pool to settle: %s", why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// busy says what is still running, or "".
func (h *harness) busy() string {
	for _, st := range h.app.Pool.Stats() {
		if st.InFlight != 0 || !st.Healthy {
			return fmt.Sprintf("upstream %s: %d in flight, healthy %v", st.URL, st.InFlight, st.Healthy)
		}
	}
	for i, s := range h.sims {
		if st := s.Stats(); st.Running != 0 || st.Waiting != 0 {
			return fmt.Sprintf("simulator %d: %d running, %d waiting", i, st.Running, st.Waiting)
		}
	}
	if n := h.app.Queue.Len(); n != 0 {
		return fmt.Sprintf("%d queued", n)
	}
	return ""
}

func (h *harness) simStats() (failed, aborted int64) {
	for _, s := range h.sims {
		st := s.Stats()
		failed += st.Failed
		aborted += st.Aborted
	}
	return failed, aborted
}
