package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy"
)

const shutdownConfig = `
defaults: {rate: 0.2, backlog: 100, max_wait: 60s}
tenants:
  - {id: acme, keys: [sk-acme]}
`

// TestShutdownLetsRequestsFinishWithinGrace: a request running on the
// upstream when SIGTERM comes completes normally.
func TestShutdownLetsRequestsFinishWithinGrace(t *testing.T) {
	ta := startApp(t, vllmsim.Config{Models: []string{simModel}, TTFT: 300 * time.Millisecond, ITL: time.Millisecond}, shutdownConfig)
	eventually(t, 5*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })
	results := ta.fire(1, "sk-acme")
	eventually(t, 5*time.Second, "the request to reach the upstream", func() bool { return ta.sim.Stats().Running == 1 })
	if err := ta.a.Shutdown(context.Background(), 0, 10*time.Second); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if r := <-results; r.status != 200 {
		t.Fatalf("the running request: %d %s", r.status, r.body)
	}
	if strings.Contains(ta.logs.String(), "grace period over") {
		t.Fatalf("nothing should have been cut:\n%s", ta.logs)
	}
}

// TestShutdownCutsWhatOutlivesGrace: a stream stuck on a slow upstream
// and a request still queued behind a slow pace are ended with an
// explicit error when the grace period is over, and the cut is logged.
func TestShutdownCutsWhatOutlivesGrace(t *testing.T) {
	ta := startApp(t, vllmsim.Config{Models: []string{simModel}, TTFT: time.Minute}, shutdownConfig)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, 5*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })
	streamed := make(chan result, 1)
	go func() {
		code, body := ta.stream("sk-acme")
		streamed <- result{status: code, body: body}
	}()
	eventually(t, 5*time.Second, "the stream to reach the upstream", func() bool { return ta.sim.Stats().Running == 1 })
	queued := ta.fire(1, "sk-acme")
	eventually(t, 5*time.Second, "a queued request", func() bool { return ta.a.Queue.Backlog(k) == 1 })

	start := time.Now()
	if err := ta.a.Shutdown(context.Background(), 0, 300*time.Millisecond); err != nil {
		t.Logf("Shutdown = %v", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("Shutdown took %v with a 300ms grace", d)
	}
	s := <-streamed
	const shutdownErr = `"message":"pacegate is shutting down and could not finish this request within its grace period.","type":"server_error","param":null,"code":"server_shutdown"`
	if s.status != 200 || !strings.Contains(s.body, shutdownErr) {
		t.Fatalf("the cut stream lacks the explicit error event: %d\n%s", s.status, s.body)
	}
	q := <-queued
	if q.status != http.StatusServiceUnavailable || !strings.Contains(q.body, shutdownErr) {
		t.Fatalf("the cut queued request: %d %s", q.status, q.body)
	}
	logs := ta.logs.String()
	if !strings.Contains(logs, `msg="shutdown grace period over; ending requests still in flight" grace=300ms requests=2`) {
		t.Fatalf("the cut is not logged:\n%s", logs)
	}
	if code, _ := ta.chat(context.Background(), "sk-acme"); code == 200 {
		t.Fatal("a request after shutdown was served")
	}
}

// holdFirst fronts a simulated vLLM and holds the first generation
// request until release is called; held is closed when it arrives.
type holdFirst struct {
	sim     *vllmsim.Server
	n       atomic.Int32
	held    chan struct{}
	release func() // idempotent
	done    chan struct{}
}

func newHoldFirst(sim *vllmsim.Server) *holdFirst {
	h := &holdFirst{sim: sim, held: make(chan struct{}), done: make(chan struct{})}
	h.release = sync.OnceFunc(func() { close(h.done) })
	return h
}

func (h *holdFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && h.n.Add(1) == 1 {
		close(h.held)
		<-h.done
	}
	h.sim.ServeHTTP(w, r)
}

// TestShutdownDelayServesWhileNotReady: for the shutdown delay /readyz
// answers 503 "draining" while new connections and requests are still
// served; then the listener closes, and a request in flight still
// finishes within the grace period (issue 11: the listener used to close
// at once). The delay's timer is the App's after seam, so the test ends
// it when it has checked what happens during it.
func TestShutdownDelayServesWhileNotReady(t *testing.T) {
	sim := vllmsim.New(fastSim())
	up := newHoldFirst(sim)
	ta := startAppBehind(t, sim, up, readyConfig)
	t.Cleanup(up.release) // before the upstream's server closes, should the test fail
	delayed := make(chan time.Duration, 1)
	endDelay := make(chan time.Time)
	ta.a.after = func(d time.Duration) <-chan time.Time {
		delayed <- d
		return endDelay
	}
	inFlight := ta.fire(1, "sk-acme")
	recv(t, up.held, "the first request to reach the upstream")
	shutdown := make(chan error, 1)
	go func() { shutdown <- ta.a.Shutdown(context.Background(), time.Hour, 10*time.Second) }()
	if d := recv(t, delayed, "the shutdown delay"); d != time.Hour {
		t.Fatalf("delay %v, want 1h", d)
	}

	want := `{"error":{"message":"not ready: draining","type":"server_error","param":null,"code":"service_unavailable"}}`
	if code, body := ta.get("/readyz"); code != http.StatusServiceUnavailable || body != want {
		t.Fatalf("/readyz during the delay: %d %s\nwant 503 %s", code, body, want)
	}
	if code, body := ta.chat(t.Context(), "sk-acme"); code != http.StatusOK {
		t.Fatalf("a new request during the delay: %d %s", code, body)
	}

	close(endDelay)
	recv(t, ta.a.done, "the listener to close")
	if c, err := net.Dial("tcp", ta.a.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial after the delay: %v, want connection refused", err)
	}
	up.release()
	if r := recv(t, inFlight, "the request in flight"); r.status != http.StatusOK {
		t.Fatalf("the request in flight: %d %s", r.status, r.body)
	}
	if err := recv(t, shutdown, "Shutdown"); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if strings.Contains(ta.logs.String(), "grace period over") {
		t.Fatalf("nothing should have been cut:\n%s", ta.logs)
	}
}

// recv waits for ch, bounded so that a broken shutdown fails the test
// instead of hanging it.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
