package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

func TestUpstreamFailureBeforeFirstByteRetriesOnAnother(t *testing.T) {
	bad, good := newSim(t, fastSim()), newSim(t, fastSim())
	bad.InjectFailure(vllmsim.Failure{StatusBeforeFirstByte: http.StatusInternalServerError})
	s := startStack(t, tenantsYAML, bad, good)
	for range 4 {
		resp := s.post(t.Context(), "/v1/chat/completions", "sk-alice", chatBody)
		if body := readAll(t, resp.Body); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	if len(good.Arrivals()) != 4 {
		t.Errorf("healthy upstream served %d, want 4", len(good.Arrivals()))
	}
}

func TestUpstreamFailureBeforeFirstByteWithoutAlternative(t *testing.T) {
	bad := newSim(t, fastSim())
	bad.InjectFailure(vllmsim.Failure{StatusBeforeFirstByte: http.StatusInternalServerError})
	s := startStack(t, tenantsYAML, bad)
	resp := s.post(t.Context(), "/v1/chat/completions", "sk-alice", chatBody)
	body := readAll(t, resp.Body)
	want := `{"error":{"message":"The model server answered Internal Server Error.","type":"server_error","param":null,"code":"upstream_error"}}`
	if resp.StatusCode != http.StatusBadGateway || body != want {
		t.Errorf("got %d %s\nwant 502 %s", resp.StatusCode, body, want)
	}
}

func TestUpstreamResetMidStreamEndsWithErrorEvent(t *testing.T) {
	sim := newSim(t, fastSim())
	sim.InjectFailure(vllmsim.Failure{ResetAfterChunks: 2})
	s := startStack(t, tenantsYAML, sim)
	resp := s.post(t.Context(), "/v1/chat/completions", "sk-alice",
		`{"model":"sim-model","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	last := events[len(events)-1]
	want := `data: {"error":{"message":"The model server's stream broke off before it finished.","type":"server_error","param":null,"code":"upstream_error"}}`
	if last != want {
		t.Errorf("last event = %q\nwant %q", last, want)
	}
	if len(events) != 3 {
		t.Errorf("events = %q, want 2 chunks then the error", events)
	}
}

func TestOverallTimeout(t *testing.T) {
	// The timeout must pass after the upstream's stream headers (they
	// come as soon as the request reaches it) and long before its first
	// token.
	sim := newSim(t, vllmsim.Config{TTFT: time.Minute, ITL: time.Millisecond})
	s := startStack(t, `
server: {request_timeout: 3s}
defaults: {max_wait: 2s}
`+tenantsYAML, sim)
	want := `{"error":{"message":"The request did not complete within 3s.","type":"timeout","param":null,"code":"timeout"}}`
	// Both halves wait out the timeout, so they run at once, one tenant each.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		resp := s.post(t.Context(), "/v1/chat/completions", "sk-alice", chatBody)
		body := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusGatewayTimeout || body != want {
			t.Errorf("non-streamed: %d %s\nwant 504 %s", resp.StatusCode, body, want)
		}
	})
	// The upstream's stream headers arrive at once (as vLLM sends them), so
	// the stream has started: the timeout comes as its last event.
	wg.Go(func() {
		resp := s.post(t.Context(), "/v1/chat/completions", "sk-bob", streamBody)
		body := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusOK || body != "data: "+want+"\n\n" {
			t.Errorf("streamed: %d %q\nwant 200 %q", resp.StatusCode, body, "data: "+want+"\n\n")
		}
	})
}
