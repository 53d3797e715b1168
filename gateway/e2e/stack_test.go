package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/gateway/app"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

// stack is a running pacegate in front of one or more simulated vLLMs.
type stack struct {
	t    testing.TB
	app  *app.App
	sims []*simServer
	url  string
}

// simServer is a vllmsim behind a real loopback socket, with a log of the
// requests that reached it and a report of each one it finished with.
type simServer struct {
	*vllmsim.Server
	url      string
	finished chan string // request ids, once the simulator's handler returned

	mu       sync.Mutex
	arrivals []arrival
	held     chan struct{} // set by hold: generation requests wait for it to close
}

type arrival struct {
	id string
	at time.Time
}

func (s *simServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		s.mu.Lock()
		s.arrivals = append(s.arrivals, arrival{id: r.Header.Get("X-Request-Id"), at: time.Now()})
		held := s.held
		s.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-r.Context().Done(): // the simulator then sees its client gone
			}
		}
	}
	s.Server.ServeHTTP(w, r)
	if r.Method == http.MethodPost {
		select {
		case s.finished <- r.Header.Get("X-Request-Id"):
		default: // a test that does not read it cannot stall the simulator
		}
	}
}

// hold makes the generation requests that arrive from now on wait, once
// logged in Arrivals, until release is called (at cleanup at the latest):
// none of them can finish, and so free a slot or give tokens back, before
// the test has seen what it needs to happen first.
func (s *simServer) hold(t testing.TB) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.held = ch
	s.mu.Unlock()
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	return release
}

// allDecided reports, while sim holds the requests it gets (hold), whether
// each of n requests of bucket k sent through gws has been decided:
// answered (a rejection: the admitted ones cannot finish yet), arrived at
// sim (less the skip arrivals that came before them), or queued. The
// arrivals are read before the backlogs, so that a request leaving its
// bucket for the model in between is not counted twice.
func allDecided(n int, answered int64, sim *simServer, skip int, k policy.Key, gws ...*stack) bool {
	got := int(answered) + len(sim.Arrivals()) - skip
	for _, g := range gws {
		got += g.app.Queue.Backlog(k)
	}
	return got >= n
}

// awaitFinished waits until the simulator's handler for the request id
// returned, whether it completed or saw its client leave. The timeout only
// guards against a hang.
func (s *simServer) awaitFinished(t testing.TB, id string, timeout time.Duration) {
	t.Helper()
	guard := time.NewTimer(timeout)
	defer guard.Stop()
	for {
		select {
		case got := <-s.finished:
			if got == id {
				return
			}
		case <-guard.C:
			t.Fatalf("the simulator never finished request %q (hang guard %s)", id, timeout)
		}
	}
}

// Arrivals returns a copy of the generation requests seen so far.
func (s *simServer) Arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.arrivals...)
}

func (s *simServer) saw(id string) bool {
	for _, a := range s.Arrivals() {
		if a.id == id {
			return true
		}
	}
	return false
}

func newSim(t testing.TB, cfg vllmsim.Config) *simServer {
	t.Helper()
	if len(cfg.Models) == 0 {
		cfg.Models = []string{"sim-model"}
	}
	s := &simServer{Server: vllmsim.New(cfg), finished: make(chan string, 1024)}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	s.url = ts.URL
	return s
}

// fastSim answers at once: tests about the gateway, not about latency.
func fastSim() vllmsim.Config {
	return vllmsim.Config{TTFT: time.Millisecond, ITL: time.Millisecond}
}

// tenantsYAML is the tenants part shared by most tests.
const tenantsYAML = `
tenants:
  - id: alice
    org: wonderland
    keys: ["sk-alice"]
  - id: bob
    org: builders
    keys: ["sk-bob"]
`

// startStack runs pacegate with the config body (everything but listen and
// upstreams) in front of sims.
func startStack(t testing.TB, body string, sims ...*simServer) *stack {
	t.Helper()
	return startStackLimited(t, 0, body, sims...)
}

// startStackLimited is startStack with each upstream's max_concurrency
// set to slots (0: the default).
func startStackLimited(t testing.TB, slots int, body string, sims ...*simServer) *stack {
	t.Helper()
	var b strings.Builder
	b.WriteString("listen: \"127.0.0.1:0\"\nupstreams:\n")
	for _, s := range sims {
		fmt.Fprintf(&b, "  - url: %q\n", s.url)
		if slots > 0 {
			fmt.Fprintf(&b, "    max_concurrency: %d\n", slots)
		}
	}
	b.WriteString(body)
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, b.String())
	}
	a, err := app.New(cfg, app.Options{Logger: captureLogs(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Shutdown(context.Background(), 0, 5*time.Second)
		cancel()
	})
	return &stack{t: t, app: a, sims: sims, url: a.URL()}
}

// liteTopicMessages is how many messages the embedded engine holds, in
// every LiteTopic: a dropped request's leaves only when its slot comes.
func (s *stack) liteTopicMessages() int {
	return s.app.Queue.Backend().(*embedded.Engine).Stats().Messages
}

// post sends a JSON body with key and returns the response.
func (s *stack) post(ctx context.Context, path, key, body string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventually polls cond until it holds or the deadline passes. It is for
// state that changes on another goroutine the test cannot synchronise with
// (a queue draining in the server).
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func key(tenant, model string) policy.Key { return policy.Key{Tenant: tenant, Model: model} }
