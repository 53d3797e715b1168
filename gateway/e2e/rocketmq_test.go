package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
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
