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

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// The noisy neighbour, through real sockets: heavy fills a pool of two
// slots and queues four more requests behind them; when light then asks
// for one, the next slot that frees is light's, not heavy's next, although
// heavy asked first. Every request ends with its full response. (The model
// holds heavy's two until light waits, so that no slot frees before; then
// heavy's first, the longer, frees its slot last, and the model sees the
// requests in the order they were granted.)
func TestNoisyNeighbourGetsTheNextSlot(t *testing.T) {
	sim := newSim(t, vllmsim.Config{TTFT: 5 * time.Millisecond, ITL: 10 * time.Millisecond})
	s := startStackLimited(t, 2, `
defaults: {rate: 1000, backlog: 100, max_wait: 60s}
tenants:
  - {id: heavy, keys: ["sk-heavy"]}
  - {id: light, keys: ["sk-light"]}
`, sim)
	body := func(tokens int) string {
		return fmt.Sprintf(`{"model":"sim-model","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, tokens)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{} // request id → status
	send := func(key string, tokens int) {
		wg.Go(func() {
			resp := s.post(context.Background(), "/v1/chat/completions", key, body(tokens))
			readAll(t, resp.Body)
			mu.Lock()
			statuses[resp.Header.Get("X-Request-Id")] = resp.StatusCode
			mu.Unlock()
		})
	}
	release := sim.hold(t)
	send("sk-heavy", 60) // 0.6 s
	eventually(t, time.Minute, "heavy's first request to run", func() bool { return len(sim.Arrivals()) == 1 })
	for range 5 {
		send("sk-heavy", 30) // 0.3 s each: one runs, four wait
	}
	eventually(t, time.Minute, "heavy to fill the pool and queue four", func() bool {
		return len(sim.Arrivals()) == 2 && s.app.Queue.Backlog(key("heavy", "sim-model")) == 4
	})
	var light string
	var lightStatus int
	wg.Go(func() {
		resp := s.post(context.Background(), "/v1/chat/completions", "sk-light", body(2))
		readAll(t, resp.Body)
		light, lightStatus = resp.Header.Get("X-Request-Id"), resp.StatusCode
	})
	// Suspended for capacity: it has joined the model's wait set.
	eventually(t, time.Minute, "light to wait for a slot", func() bool {
		st, ok := s.app.Queue.Stat(key("light", "sim-model"))
		return ok && st.Suspends > 0
	})
	release()
	wg.Wait()
	if lightStatus != http.StatusOK {
		t.Fatalf("light: status %d", lightStatus)
	}
	for id, st := range statuses {
		if st != http.StatusOK {
			t.Errorf("heavy request %s: status %d", id, st)
		}
	}
	arr := sim.Arrivals()
	if len(arr) != 7 {
		t.Fatalf("%d requests reached the model, want 7", len(arr))
	}
	if arr[2].id != light {
		var order []string
		for _, a := range arr {
			order = append(order, map[bool]string{true: "light", false: "heavy"}[a.id == light])
		}
		t.Fatalf("the model saw %v: light's request should take the first slot that freed after it asked", order)
	}
}

// With fairness.headroom, the light tenant does not wait for a slot to
// free at all: heavy's two long requests fill the pool's two slots and
// more wait behind them, yet light's requests, one after another, reach
// the model and finish while heavy's first two still run, and none of
// heavy's waiting requests takes the room light leaves between its own.
func TestHeadroomLightTenantNeverWaitsForTheFlood(t *testing.T) {
	sim := newSim(t, vllmsim.Config{TTFT: 5 * time.Millisecond, ITL: 10 * time.Millisecond})
	s := startStackLimited(t, 2, `
defaults: {rate: 1000, backlog: 100, max_wait: 60s}
fairness: {headroom: 1}
tenants:
  - {id: heavy, keys: ["sk-heavy"]}
  - {id: light, keys: ["sk-light"]}
`, sim)
	body := func(tokens int) string {
		return fmt.Sprintf(`{"model":"sim-model","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, tokens)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	var heavyEnded sync.WaitGroup
	for range 4 { // two run (30 s each at most: cancelled at the end), two wait
		heavyEnded.Add(1)
		wg.Go(func() {
			defer heavyEnded.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/chat/completions", strings.NewReader(body(3000)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-heavy")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body) // ends when the test cancels ctx
				resp.Body.Close()
			}
		})
	}
	eventually(t, time.Minute, "heavy to fill the pool and queue two", func() bool {
		return len(sim.Arrivals()) == 2 && s.app.Queue.Backlog(key("heavy", "sim-model")) == 2
	})
	var light []string
	for range 3 {
		resp := s.post(context.Background(), "/v1/chat/completions", "sk-light", body(2))
		got := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(got, `"finish_reason":"length"`) {
			t.Fatalf("light: status %d, body %s", resp.StatusCode, got)
		}
		light = append(light, resp.Header.Get("X-Request-Id"))
	}
	arr := sim.Arrivals()
	if len(arr) != 5 {
		t.Fatalf("%d requests reached the model, want heavy's two and light's three", len(arr))
	}
	for i, id := range light {
		if arr[2+i].id != id {
			t.Fatalf("arrival %d is %s, want light's request %s: nothing of heavy's may take light's room", 2+i, arr[2+i].id, id)
		}
	}
	if n := s.app.Queue.Backlog(key("heavy", "sim-model")); n != 2 {
		t.Fatalf("heavy's backlog %d after light's requests, want 2: its first two still run", n)
	}
	cancel() // heavy's clients leave; their calls are aborted
	heavyEnded.Wait()
}
