package app

import (
	"context"
	"net/http"
	"strings"
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
// upstream when SIGTERM comes completes normally. Its 2 s TTFT is the
// window in which the poll below must see it running (a stall that long
// would let it end first and the poll time out).
func TestShutdownLetsRequestsFinishWithinGrace(t *testing.T) {
	ta := startApp(t, vllmsim.Config{Models: []string{simModel}, TTFT: 2 * time.Second, ITL: time.Millisecond}, shutdownConfig)
	eventually(t, 10*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })
	results := ta.fire(1, "sk-acme")
	eventually(t, 10*time.Second, "the request to reach the upstream", func() bool { return ta.sim.Stats().Running == 1 })
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
	eventually(t, 10*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })
	streamed := make(chan result, 1)
	go func() {
		code, body := ta.stream("sk-acme")
		streamed <- result{status: code, body: body}
	}()
	eventually(t, 10*time.Second, "the stream to reach the upstream", func() bool { return ta.sim.Stats().Running == 1 })
	queued := ta.fire(1, "sk-acme")
	eventually(t, 10*time.Second, "a queued request", func() bool { return ta.a.Queue.Backlog(k) == 1 })

	if err := ta.a.Shutdown(context.Background(), 0, 300*time.Millisecond); err != nil {
		t.Logf("Shutdown = %v", err)
	}
	// The stream's first token is a minute away: Shutdown returned at the
	// end of the grace period, not when the upstream was done.
	if st := ta.sim.Stats(); st.Completed != 0 {
		t.Fatalf("sim stats after Shutdown = %+v, want nothing completed", st)
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
