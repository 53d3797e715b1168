package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rocketmqQueue returns the queue section for a stack on the broker that
// scripts/rocketmq/rmq.sh started, with a replica id unique to this run so
// that LiteTopics left by earlier runs never mix in. Without a broker the
// test is skipped.
func rocketmqQueue(t *testing.T, replica string) string {
	t.Helper()
	endpoint := os.Getenv("PACEGATE_ROCKETMQ_ENDPOINT")
	if endpoint == "" {
		t.Skip("set PACEGATE_ROCKETMQ_ENDPOINT (bash scripts/rocketmq/rmq.sh fetch start init; eval \"$(bash scripts/rocketmq/rmq.sh env)\") to run the RocketMQ suite; make test does")
	}
	return fmt.Sprintf(`
queue:
  backend: rocketmq
  rocketmq: {endpoint: %q, topic: %q, group: %q, replica_id: %q}
`, endpoint, envOr("PACEGATE_ROCKETMQ_TOPIC", "LLM_REQ"), envOr("PACEGATE_ROCKETMQ_GROUP", "GID_PACEGATE"), replica+runID)
}

var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var createdField = regexp.MustCompile(`"created":\d+`)

// normalize removes what legitimately differs between two runs of the same
// request: the request id (in the response ids) and the creation time.
func normalize(body, requestID string) string {
	return createdField.ReplaceAllString(strings.ReplaceAll(body, requestID, "ID"), `"created":0`)
}

// The same requests through the RocketMQ backend and through the embedded
// one give the same bytes.
func TestRocketMQResponsesMatchEmbedded(t *testing.T) {
	queue := rocketmqQueue(t, "cmp")
	sim := newSim(t, fastSim())
	embedded := startStack(t, tenantsYAML, sim)
	broker := startStack(t, queue+tenantsYAML, sim)
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", chatBody},
		{"/v1/chat/completions", streamBody},
		{"/v1/chat/completions", `{"model":"sim-model","stream":true,"stream_options":{"include_usage":true},"max_tokens":3,"messages":[{"role":"user","content":"a b"}]}`},
		{"/v1/completions", `{"model":"sim-model","prompt":"once upon","max_tokens":3}`},
		{"/v1/completions", `{"model":"sim-model","prompt":"once upon","stream":true,"max_tokens":3}`},
	}
	for _, b := range bodies {
		want := call(t, embedded, b.path, b.body)
		got := call(t, broker, b.path, b.body)
		if got != want {
			t.Errorf("%s %s\nrocketmq: %s\nembedded: %s", b.path, b.body, got, want)
		}
	}
}

// call sends one request and returns status, content type and normalised body.
func call(t *testing.T, s *stack, path, body string) string {
	t.Helper()
	resp := s.post(t.Context(), path, "sk-alice", body)
	text := readAll(t, resp.Body)
	return fmt.Sprintf("%d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), normalize(text, resp.Header.Get("X-Request-Id")))
}

// Two gateway instances (each with its own RocketMQ clients and client id)
// on one broker and one consumer group: every client gets its own complete
// response, none consumed by the wrong replica.
func TestRocketMQTwoReplicas(t *testing.T) {
	sim := newSim(t, fastSim())
	a := startStack(t, rocketmqQueue(t, "a")+tenantsYAML, sim)
	b := startStack(t, rocketmqQueue(t, "b")+tenantsYAML, sim)
	checkOwnResponses(t, sim, 8, a.url, b.url)
}

// checkOwnResponses streams perGateway requests through each gateway at
// once, alternating tenants, and checks that every response is complete
// and carries its own request id, and that the model saw each request once.
func checkOwnResponses(t *testing.T, sim *simServer, perGateway int, urls ...string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, len(urls)*perGateway)
	for i, base := range urls {
		for j := range perGateway {
			wg.Go(func() {
				resp, err := http.DefaultClient.Do(newPost(context.Background(), base, []string{"sk-alice", "sk-bob"}[j%2], streamBody))
				if err != nil {
					errs <- err.Error()
					return
				}
				body := readAll(t, resp.Body)
				id := resp.Header.Get("X-Request-Id")
				if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"chatcmpl-`+id+`"`) ||
					!strings.Contains(body, `"content":"tok1"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
					errs <- fmt.Sprintf("gateway %d request %d (%s): %d %s", i, j, id, resp.StatusCode, body)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(sim.Arrivals()); n != len(urls)*perGateway {
		t.Errorf("the model saw %d requests, want %d", n, len(urls)*perGateway)
	}
}

// A broker that cannot be reached is never silent: the gateway starts,
// /readyz says why it is not ready, and requests get a 503 at once instead
// of hanging. (No broker needed: the endpoint is a closed port.)
func TestRocketMQUnreachableGives503(t *testing.T) {
	s := startStack(t, `
queue:
  backend: rocketmq
  rocketmq: {endpoint: "127.0.0.1:1", replica_id: down}
`+tenantsYAML, newSim(t, fastSim()))
	resp, err := http.Get(s.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "queue: consume: queue backend unavailable: rocketmq at 127.0.0.1:1") {
		t.Errorf("/readyz = %d %s", resp.StatusCode, body)
	}
	resp = s.post(t.Context(), "/v1/chat/completions", "sk-alice", chatBody)
	body = readAll(t, resp.Body)
	want := `{"error":{"message":"The request queue is unavailable; please retry shortly.","type":"server_error","param":null,"code":"service_unavailable"}}`
	if resp.StatusCode != http.StatusServiceUnavailable || body != want || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("got %d %s (Retry-After %q)\nwant 503 %s", resp.StatusCode, body, resp.Header.Get("Retry-After"), want)
	}
}

// A burst of new tenants on the broker (100 new tenants with 5 concurrent
// clients each, all at once, through one gateway) gets no 503: every request is answered 200. Before the
// backend subscribed LiteTopics concurrently and stopped waiting on a
// slow SubscribeLite, 3.3% of such requests got 503 (publish timeout).
func TestRocketMQColdStartBurst(t *testing.T) {
	queue := rocketmqQueue(t, "burst")
	// PACEGATE_ROCKETMQ_BURST_TENANTS scales it up (the bench's
	// rocketmq-scale scenario runs 1,000).
	tenants, clients, each := 100, 5, 4
	if n, err := strconv.Atoi(os.Getenv("PACEGATE_ROCKETMQ_BURST_TENANTS")); err == nil && n > 0 {
		tenants = n
	}
	var y strings.Builder
	y.WriteString("defaults: {rpm: 0, tpm: 0, burst: 0, rate: .inf, backlog: 100000, max_wait: 60s}\ntenants:\n")
	for i := range tenants {
		fmt.Fprintf(&y, "  - {id: t%03d, keys: [\"sk-t%03d\"]}\n", i, i)
	}
	sim := newSim(t, fastSim())
	s := startStack(t, queue+y.String(), sim)
	var mu sync.Mutex
	codes := map[int]int{}
	var first []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range tenants {
		for range clients {
			wg.Go(func() {
				<-start
				for range each {
					resp, err := http.DefaultClient.Do(newPost(context.Background(), s.url, fmt.Sprintf("sk-t%03d", i), streamBody))
					code := -1
					var body string
					if err == nil {
						code = resp.StatusCode
						body = readAll(t, resp.Body)
					}
					mu.Lock()
					codes[code]++
					if code != http.StatusOK && len(first) < 5 {
						first = append(first, fmt.Sprintf("t%03d: %d %v %s", i, code, err, body))
					}
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	t.Logf("%d new tenants × %d clients × %d requests: status counts %v", tenants, clients, each, codes)
	if codes[http.StatusOK] != tenants*clients*each {
		t.Errorf("%d of %d requests answered 200; first failures: %v", codes[http.StatusOK], tenants*clients*each, first)
	}
}

// The broker itself restarts (namesrv and proxy stay up) while clients
// stream through the gateway: Lite subscriptions live only in broker
// memory, so the restarted broker knows none. Every request ends with its
// complete response or an explicit error, none in silence, and requests
// are served again soon after the broker's return.
func TestRocketMQBrokerRestartThroughGateway(t *testing.T) {
	queue := rocketmqQueue(t, "brestart")
	if os.Getenv("PACEGATE_ROCKETMQ_NO_RESTART") != "" {
		t.Skip("PACEGATE_ROCKETMQ_NO_RESTART is set")
	}
	script, _ := filepath.Abs("../../scripts/rocketmq/rmq.sh")
	queue = strings.Replace(queue, "replica_id:", "invisible: 10s, replica_id:", 1)
	s := startStack(t, "server: {request_timeout: 40s}\n"+queue+tenantsYAML, newSim(t, fastSim()))
	ctx, stop := context.WithCancel(t.Context())
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		silent   []string
		lastOK   time.Time
		wg       sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for range 5000 { // bounded; a 10 ms pause after an error
				if ctx.Err() != nil {
					return
				}
				kind, detail := classify(s.url)
				mu.Lock()
				outcomes[kind]++
				if kind == "silent" {
					silent = append(silent, detail)
				}
				if kind == "ok" {
					lastOK = time.Now()
				}
				mu.Unlock()
				if kind != "ok" {
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
		})
	}
	out, err := exec.CommandContext(t.Context(), "bash", script, "restart-broker").CombinedOutput()
	back := time.Now()
	if err != nil {
		stop()
		wg.Wait()
		t.Fatalf("restart-broker: %v\n%s", err, out)
	}
	eventually(t, 60*time.Second, "a request served after the broker's return", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lastOK.After(back)
	})
	mu.Lock()
	resumed := lastOK.Sub(back)
	mu.Unlock()
	stop()
	wg.Wait()
	t.Logf("outcomes during the broker restart: %v; first request served %s after restart-broker returned", outcomes, resumed.Round(time.Millisecond))
	for _, d := range silent {
		t.Errorf("a request ended in silence: %s", d)
	}
	// A LiteTopic whose messages were popped and not yet acknowledged
	// when the broker went down stays blocked (FIFO) until the restarted
	// broker revives them, measured at about 20 s with invisible 10 s;
	// the others resume within a second. The clients here all use one
	// tenant, so the bound is the former.
	if resumed > 30*time.Second {
		t.Errorf("serving resumed %s after the broker was back, want within the messages' invisibility and the broker's revive (30 s)", resumed)
	}
}
