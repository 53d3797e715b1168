package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// A client that leaves while its request is queued: the request is dropped
// when its turn comes and never reaches the model.
func TestDisconnectWhileQueuedNeverReachesUpstream(t *testing.T) {
	sim := newSim(t, fastSim())
	s := startStack(t, `
defaults: {rate: 1, backlog: 100, max_wait: 10s}
`+tenantsYAML, sim)
	readAll(t, s.post(t.Context(), "/v1/chat/completions", "sk-alice", chatBody).Body) // takes the slot
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Headers arrive only with the first queued comment (5 s away),
		// so this blocks until the cancel below.
		if resp, err := http.DefaultClient.Do(newPost(ctx, s.url, "sk-alice", streamBody)); err == nil {
			resp.Body.Close()
		}
	}()
	k := key("alice", "sim-model")
	eventually(t, 2*time.Second, "the request to be queued", func() bool { return s.app.Queue.Backlog(k) == 1 })
	cancel()
	<-done
	// It leaves the bucket's backlog as soon as its handler sees the
	// disconnect, well before its slot...
	eventually(t, 200*time.Millisecond, "the cancelled request to leave the backlog", func() bool { return s.app.Queue.Backlog(k) == 0 })
	// ...and when its slot comes, 1 s after the first request, the
	// consumer drops it from the LiteTopic.
	eventually(t, 3*time.Second, "the consumer to drop the message", func() bool {
		return s.app.Queue.Backend().(*embedded.Engine).Stats().Messages == 0
	})
	if n := len(sim.Arrivals()); n != 1 {
		t.Fatalf("the model saw %d requests, want only the first", n)
	}
	if st := sim.Stats(); st.Requests != 1 {
		t.Errorf("sim stats = %+v, want 1 request", st)
	}
}

// A client that leaves mid-stream: the upstream call is cancelled and the
// simulated vLLM records the abort within 100 ms.
func TestDisconnectMidStreamAbortsUpstream(t *testing.T) {
	sim := newSim(t, vllmsim.Config{TTFT: time.Millisecond, ITL: 50 * time.Millisecond})
	s := startStack(t, tenantsYAML, sim)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp, err := http.DefaultClient.Do(newPost(ctx, s.url, "sk-alice",
		`{"model":"sim-model","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"tok1 "`) {
			break
		}
	}
	cancelled := time.Now()
	cancel()
	resp.Body.Close()
	select {
	case ab := <-sim.Aborts():
		if ab.ID != id {
			t.Errorf("abort for %q, want %q", ab.ID, id)
		}
		if d := ab.At.Sub(cancelled); d > 100*time.Millisecond {
			t.Errorf("upstream abort %s after the disconnect, want <= 100ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the simulated upstream never saw the abort")
	}
}
