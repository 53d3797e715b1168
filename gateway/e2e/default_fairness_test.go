package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// Fair by default, through real sockets, with no fairness settings and
// no max_concurrency, in front of a simulated vLLM that runs 8 sequences
// and slows as its batch fills: pacegate learns the server's room from
// its /metrics and queues the flood itself (nothing waits at the
// server); a light tenant's first request takes the next slot that
// frees, and its next ones reach the server at once, in the room kept for
// it between its requests, while the flood's requests wait.
func TestDefaultLearnsTheRoomAndKeepsItFair(t *testing.T) {
	sim := newSim(t, vllmsim.Config{TTFT: 5 * time.Millisecond, ITL: 10 * time.Millisecond, MaxNumSeqs: 8, TimeFactorUnderLoad: 2})
	s := startStack(t, `
defaults: {rate: 1000, backlog: 100, max_wait: 60s}
tenants:
  - {id: heavy, keys: ["sk-heavy"]}
  - {id: light, keys: ["sk-light"]}
`, sim)
	body := func(tokens int) string {
		return fmt.Sprintf(`{"model":"sim-model","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, tokens)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range 16 { // 8 run, 8 wait; the first ends after about a second, the others far later
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/chat/completions", strings.NewReader(body(50+500*i)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-heavy")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body) // ends when the test cancels ctx
				resp.Body.Close()
			}
		})
		// in order, so that the short one runs
		eventually(t, time.Minute, "heavy's request to arrive", func() bool {
			return len(sim.Arrivals()) == min(i+1, 8) && s.app.Queue.Backlog(key("heavy", "sim-model")) == max(i+1-8, 0)
		})
	}
	if st := sim.Stats(); st.Waiting != 0 {
		t.Fatalf("the simulator queues %d requests; pacegate should hold them", st.Waiting)
	}
	if st := s.app.Pool.Stats()[0]; st.Room != upstream.RoomMetrics || st.Limit != 8 {
		t.Fatalf("upstream %+v: want its limit learned from its metrics, 8", st)
	}
	var delays []time.Duration // from the light client's send to the server's arrival
	var lastLight time.Time    // when light's last request reached the server
	for range 4 {              // closed loop: each request as soon as the last ended
		sent := time.Now()
		resp := s.post(context.Background(), "/v1/chat/completions", "sk-light", body(2))
		got := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(got, `"finish_reason":"length"`) {
			t.Fatalf("light: %d %s", resp.StatusCode, got)
		}
		id := resp.Header.Get("X-Request-Id")
		for _, a := range sim.Arrivals() {
			if a.id == id {
				delays = append(delays, a.at.Sub(sent))
				lastLight = a.at
			}
		}
	}
	if len(delays) != 4 {
		t.Fatalf("light's arrivals at the server: %v, want 4", delays)
	}
	// The first waited for heavy's shortest request (about a second);
	// the next three did not wait for a slot at all. The next slot to
	// free is heavy's second request's, 550 tokens at up to twice the ITL
	// (about 10 s after the start), so a wait for one would take far
	// longer than this bound.
	for i, d := range delays[1:] {
		if d > 5*time.Second {
			t.Errorf("light's request %d reached the server %v after it was sent (all %v): it waited for a slot", i+2, d, delays)
		}
	}
	// The slot light left is kept for it while it is recent (a second
	// after its last request ended, so after that request reached the
	// server), then heavy's next request takes it.
	eventually(t, time.Minute, "heavy to take the slot once light is no longer recent", func() bool {
		return s.app.Queue.Backlog(key("heavy", "sim-model")) == 7
	})
	if d := time.Since(lastLight); d < time.Second {
		t.Errorf("heavy took light's slot %v after light's last request reached the server, want >= 1s: the slot is kept for light while it is recent", d)
	}
	if st := sim.Stats(); st.Waiting != 0 {
		t.Errorf("the simulator queues %d requests; pacegate should hold them", st.Waiting)
	}
}
