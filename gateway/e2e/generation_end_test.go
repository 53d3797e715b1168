package e2e

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy/policytest"
)

// A client that leaves mid-stream on /v1/responses or /v1/messages: the
// upstream call is cancelled, and the simulated vLLM aborts the request
// instead of generating the remaining tokens, as on chat.
func TestDisconnectMidStreamAbortsUpstreamOnEveryGenerationRoute(t *testing.T) {
	for _, tc := range []struct{ path, body, marker string }{
		{"/v1/responses", `{"model":"sim-model","stream":true,"max_output_tokens":200,"input":"hi"}`, `"delta":"tok1 "`},
		{"/v1/messages", `{"model":"sim-model","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"hi"}]}`, `"text":"tok1 "`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			// 200 tokens 50 ms apart: finishing would take 10 s.
			sim := newSim(t, vllmsim.Config{TTFT: time.Millisecond, ITL: 50 * time.Millisecond})
			s := startStack(t, tenantsYAML, sim)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-alice")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			id := resp.Header.Get("X-Request-Id")
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() && !strings.Contains(sc.Text(), tc.marker) {
			}
			cancel()
			resp.Body.Close()
			sim.awaitFinished(t, id, time.Minute)
			if st := sim.Stats(); st.Requests != 1 || st.Aborted != 1 || st.Completed != 0 {
				t.Fatalf("sim stats = %+v, want 1 request, aborted, not completed", st)
			}
		})
	}
}

// The request timeout ends a started stream with an error event each
// SDK raises as an error: openai-go's StreamError on /v1/responses,
// anthropic-sdk-go's *anthropic.Error (timeout_error) on /v1/messages.
func TestTimeoutEndsStreamWithSDKError(t *testing.T) {
	// The timeout must pass after the upstream's stream headers (they
	// come as soon as the request reaches it) and long before its first
	// token.
	sim := newSim(t, vllmsim.Config{TTFT: time.Minute, ITL: time.Millisecond})
	s := startStack(t, "\nserver: {request_timeout: 3s}\ndefaults: {max_wait: 2s}\n"+tenantsYAML, sim)
	const msg = "The request did not complete within 3s."
	// Both wait out the timeout, so they run at once, one tenant each.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		rs := sdkClient(s, "sk-alice").Responses.NewStreaming(t.Context(), responseParams("hi", 3))
		for rs.Next() {
			t.Errorf("unexpected event %s", rs.Current().Type)
		}
		var se *ssestream.StreamError
		if err := rs.Err(); !errors.As(err, &se) || !strings.Contains(se.Message, msg) {
			t.Errorf("Responses stream error = %v, want a StreamError about the timeout", err)
		}
	})
	wg.Go(func() {
		ms := anthropicClient(s, "sk-bob").Messages.NewStreaming(t.Context(), messageParams("hi", 3))
		for ms.Next() {
			t.Errorf("unexpected event %s", ms.Current().Type)
		}
		var ae *anthropic.Error
		if err := ms.Err(); !errors.As(err, &ae) || ae.Type() != "timeout_error" || ae.Message != msg {
			t.Errorf("Messages stream error = %v, want timeout_error", err)
		}
	})
}

// No route overshoots a TPM cap under concurrency: each request reserves
// its estimate at admission, so of 12 concurrent requests only as many as
// the cap holds reach the model, and what they really used stays under it.
func TestTPMNotOvershotUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		path, body string
		perRequest int // reserved by one request
	}{
		// Estimates are a quarter of the input's JSON bytes, plus one:
		// "hi" (1) + 40; the messages array (9) + 40; 152 bytes of input (39).
		{"/v1/responses", `{"model":"sim-model","input":"hi","max_output_tokens":40}`, 41},
		{"/v1/messages", `{"model":"sim-model","max_tokens":40,"messages":[{"role":"user","content":"hi"}]}`, 49},
		{"/v1/embeddings", `{"model":"sim-model","input":"` + strings.Repeat("word ", 30) + `"}`, 39},
	} {
		t.Run(tc.path, func(t *testing.T) {
			sim := newSim(t, fastSim())
			s := startStack(t, "\ndefaults: {tpm: 100, rate: 1000}\n"+tenantsYAML, sim)
			policytest.InOneWindow(t, 10*time.Second) // the 12 reservations meet one TPM window
			// No admitted request may settle (and give back the unused part
			// of its reservation) before all 12 are decided: the model holds
			// them until then.
			release := sim.hold(t)
			var answered atomic.Int64
			codes := make(chan int, 12)
			for range 12 {
				go func() {
					resp := s.post(t.Context(), tc.path, "sk-alice", tc.body)
					readAll(t, resp.Body)
					answered.Add(1)
					codes <- resp.StatusCode
				}()
			}
			eventually(t, time.Minute, "all 12 requests to be decided", func() bool {
				return allDecided(12, answered.Load(), sim, 0, key("alice", "sim-model"), s)
			})
			release()
			ok := 0
			for range 12 {
				switch c := <-codes; c {
				case 200:
					ok++
				case 429:
				default:
					t.Errorf("status %d", c)
				}
			}
			if want := 100 / tc.perRequest; ok != want {
				t.Errorf("%d admitted, want %d (100 TPM / %d reserved each)", ok, want, tc.perRequest)
			}
			if n := len(sim.Arrivals()); n != ok {
				t.Errorf("the model saw %d requests, %d were admitted", n, ok)
			}
		})
	}
}

// A client that leaves while its /v1/responses or /v1/messages stream is
// queued: the request leaves its bucket and never reaches the model.
func TestDisconnectWhileQueuedOnEveryGenerationRoute(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"sim-model","stream":true,"max_output_tokens":2,"input":"hi"}`},
		{"/v1/messages", `{"model":"sim-model","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel() // each waits for its slot
			sim := newSim(t, fastSim())
			// One release per 5 s: the request must leave its bucket
			// before its slot comes.
			s := startStack(t, "\ndefaults: {rate: 0.2, backlog: 100, max_wait: 10s}\n"+tenantsYAML, sim)
			readAll(t, s.post(t.Context(), tc.path, "sk-alice", tc.body).Body) // takes the bucket's release
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+tc.path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer sk-alice")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			k := key("alice", "sim-model")
			eventually(t, time.Minute, "the request to be queued", func() bool { return s.app.Queue.Backlog(k) == 1 })
			cancel()
			<-done
			eventually(t, time.Minute, "the cancelled request to leave its bucket", func() bool { return s.app.Queue.Backlog(k) == 0 })
			// When its slot comes, its message leaves the LiteTopic, dropped.
			eventually(t, time.Minute, "its message to leave the LiteTopic at its slot", func() bool { return s.liteTopicMessages() == 0 })
			if n := len(sim.Arrivals()); n != 1 {
				t.Fatalf("the model saw %d requests, want only the first", n)
			}
		})
	}
}
