package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// A client that leaves while its request is queued: the request is dropped
// when its turn comes and never reaches the model.
func TestDisconnectWhileQueuedNeverReachesUpstream(t *testing.T) {
	sim := newSim(t, fastSim())
	// One release per 5 s: the test must see the request leave its bucket
	// before its slot comes.
	s := startStack(t, `
defaults: {rate: 0.2, backlog: 100, max_wait: 10s}
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
	eventually(t, time.Minute, "the request to be queued", func() bool { return s.app.Queue.Backlog(k) == 1 })
	cancel()
	<-done
	// It leaves the bucket's backlog when its handler sees the
	// disconnect, before its slot (5 s after the first request) comes:
	// its message is still in the LiteTopic then...
	eventually(t, time.Minute, "the cancelled request to leave the backlog", func() bool { return s.app.Queue.Backlog(k) == 0 })
	if n := s.liteTopicMessages(); n != 1 {
		t.Fatalf("LiteTopic backlog = %d when the request left its bucket, want 1: it left only when its slot came", n)
	}
	// ...and when its slot comes the consumer drops it.
	eventually(t, time.Minute, "the consumer to drop the message", func() bool { return s.liteTopicMessages() == 0 })
	if n := len(sim.Arrivals()); n != 1 {
		t.Fatalf("the model saw %d requests, want only the first", n)
	}
	if st := sim.Stats(); st.Requests != 1 {
		t.Errorf("sim stats = %+v, want 1 request", st)
	}
}

// A client that leaves mid-stream: the upstream call is cancelled, so the
// simulated vLLM sees its client leave instead of streaming the remaining
// tokens.
func TestDisconnectMidStreamAbortsUpstream(t *testing.T) {
	// 200 tokens 50 ms apart: finishing would take 10 s.
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
	cancel()
	resp.Body.Close()
	sim.awaitFinished(t, id, time.Minute)
	if st := sim.Stats(); st.Requests != 1 || st.Aborted != 1 || st.Completed != 0 {
		t.Fatalf("sim stats = %+v, want 1 request, aborted, not completed", st)
	}
	select {
	case ab := <-sim.Aborts():
		if ab.ID != id || ab.Queued {
			t.Errorf("abort = %+v, want request %q aborted while running", ab, id)
		}
	default:
		t.Fatal("the simulator counted an abort but did not report it")
	}
}
