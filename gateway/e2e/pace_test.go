package e2e

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const chatBody = `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
const streamBody = `{"model":"sim-model","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`

// A tenant over its pace is queued, not rejected, and its requests reach
// the model spaced at its rate.
func TestOverPaceIsQueuedAndSpaced(t *testing.T) {
	sim := newSim(t, fastSim())
	s := startStack(t, `
defaults: {rate: 10, backlog: 100, max_wait: 10s}
`+tenantsYAML, sim)
	const n = 6
	var wg sync.WaitGroup
	statuses := make([]int, n)
	start := time.Now() // before the bucket's first slot, which is taken at its first request
	for i := range n {
		wg.Go(func() {
			resp := s.post(t.Context(), "/v1/chat/completions", "sk-alice", chatBody)
			readAll(t, resp.Body)
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusOK {
			t.Errorf("request %d: status %d, want 200 (queued, not rejected)", i, st)
		}
	}
	arr := sim.Arrivals()
	if len(arr) != n {
		t.Fatalf("%d requests reached the model, want %d", len(arr), n)
	}
	// Releases may be late but never early: the pacer's slots are at least
	// one interval apart (a late release keeps the grid, it does not pull
	// the next slot in) and the first is after start, so the i-th arrival
	// comes at least i intervals after start, however late the first was.
	const interval = time.Second / 10 // rate 10
	for i := 1; i < n; i++ {
		if d := arr[i].at.Sub(start); d < time.Duration(i)*interval {
			t.Errorf("release %d reached the model %s after the requests were sent, want >= %s", i, d, time.Duration(i)*interval)
		}
	}
}

var queuedComment = regexp.MustCompile(`^: queued position=(\d+) eta_ms=(\d+)$`)

// While a streamed request waits in its bucket the client sees where it
// stands.
func TestQueuedCommentsWhileWaiting(t *testing.T) {
	sim := newSim(t, fastSim())
	s := startStack(t, `
server: {heartbeat: 20ms}
defaults: {rate: 2, backlog: 100, max_wait: 10s}
`+tenantsYAML, sim)
	first := s.post(t.Context(), "/v1/chat/completions", "sk-alice", chatBody) // takes the slot
	readAll(t, first.Body)
	resp := s.post(t.Context(), "/v1/chat/completions", "sk-alice", streamBody)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var comments, data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
			comments = append(comments, line)
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	if len(comments) == 0 {
		t.Fatal("no queued comments while the request waited about 500 ms")
	}
	m := queuedComment.FindStringSubmatch(comments[0])
	if m == nil || m[1] != "1" {
		t.Errorf("first comment = %q, want ': queued position=1 eta_ms=N'", comments[0])
	}
	if len(data) != 5 || data[len(data)-1] != "[DONE]" {
		t.Errorf("data events = %q, want role, 2 tokens, finish, [DONE]", data)
	}
}

// One tenant floods its bucket; another tenant's request goes straight
// through. Alice is paced at one request per 20 s, so while the test runs
// only her first request may reach the model: bob's must be the second.
func TestIsolationBetweenTenants(t *testing.T) {
	sim := newSim(t, fastSim())
	s := startStack(t, `
defaults: {rate: 0.05, backlog: 100, max_wait: 60s}
`+tenantsYAML, sim)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	const flood = 3 // 2 queued: 20 s and 40 s away, within max_wait
	for range flood {
		wg.Go(func() {
			resp, err := http.DefaultClient.Do(newPost(ctx, s.url, "sk-alice", chatBody))
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	alice := key("alice", "sim-model")
	eventually(t, time.Minute, "alice's first request to pass and the rest to queue", func() bool {
		return len(sim.Arrivals()) == 1 && s.app.Queue.Backlog(alice) == flood-1
	})
	guard, stop := context.WithTimeout(t.Context(), time.Minute) // against a hang only
	defer stop()
	resp := s.post(guard, "/v1/chat/completions", "sk-bob", chatBody)
	readAll(t, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bob: status %d", resp.StatusCode)
	}
	// Had bob waited for alice's next release, that release would have
	// reached the model before him.
	if n := len(sim.Arrivals()); n != 2 {
		t.Errorf("the model saw %d requests when bob's was answered, want 2: alice's first, then bob's", n)
	}
	if b := s.app.Queue.Backlog(alice); b != flood-1 {
		t.Errorf("alice's backlog = %d when bob's was answered, want %d still queued", b, flood-1)
	}
}

func newPost(ctx context.Context, base, key, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	return req
}
