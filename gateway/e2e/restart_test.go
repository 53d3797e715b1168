package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The proxy restarts while clients stream through the gateway: every
// request ends with its complete response or an explicit error (a 503 with
// an OpenAI body, or an error event), none in silence; then the gateway
// reconnects and serves again.
func TestRocketMQProxyRestartThroughGateway(t *testing.T) {
	queue := rocketmqQueue(t, "restart")
	if os.Getenv("PACEGATE_ROCKETMQ_NO_RESTART") != "" {
		t.Skip("PACEGATE_ROCKETMQ_NO_RESTART is set")
	}
	script, _ := filepath.Abs("../../scripts/rocketmq/rmq.sh")
	// Messages the old consumer had already received come back after their
	// invisible time (the proxy's minimum, 10 s); a request still unanswered
	// at request_timeout gets an explicit timeout. The clients wait longer
	// than both, so an unanswered request is one the gateway left silent.
	queue = strings.Replace(queue, "rocketmq: {", "rocketmq: {invisible: 10s, ", 1)
	s := startStack(t, "server: {request_timeout: 40s}\n"+queue+tenantsYAML, newSim(t, fastSim()))
	ctx, stop := context.WithCancel(t.Context())
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		silent   []string
		wg       sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			// Bounded: at most 5,000 requests per worker, and a 10 ms
			// pause after an error so an outage is not a busy loop.
			for range 5000 {
				if ctx.Err() != nil {
					return
				}
				kind, detail := classify(s.url)
				mu.Lock()
				outcomes[kind]++
				if kind == "silent" {
					silent = append(silent, detail)
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
	restart := exec.CommandContext(t.Context(), "bash", script, "restart-proxy")
	out, err := restart.CombinedOutput()
	if err != nil {
		stop()
		wg.Wait()
		t.Fatalf("restart-proxy: %v\n%s", err, out)
	}
	eventually(t, 90*time.Second, "the gateway to be ready again", func() bool {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	stop()
	wg.Wait()
	t.Logf("outcomes during the restart: %v", outcomes)
	for _, d := range silent {
		t.Errorf("a request ended in silence: %s", d)
	}
	for i := range 3 {
		if kind, detail := classify(s.url); kind != "ok" {
			t.Errorf("request %d after the reconnect: %s %s", i, kind, detail)
		}
	}
}

// classify sends one streamed request and says how it ended: ok (the
// whole stream and [DONE]), error (an OpenAI error body or error event),
// or silent (anything else, including no answer within 60 s).
func classify(base string) (kind, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(newPost(ctx, base, "sk-alice", streamBody))
	if err != nil {
		return "silent", err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, err = io.Copy(&b, resp.Body)
	body := b.String()
	switch {
	case err != nil:
		return "silent", err.Error() + ": " + body
	case resp.StatusCode == http.StatusOK && strings.HasSuffix(body, "data: [DONE]\n\n"):
		return "ok", ""
	case resp.StatusCode == http.StatusOK && strings.Contains(body, `data: {"error":`):
		return "error", body
	case resp.StatusCode >= 400 && strings.HasPrefix(body, `{"error":{"message":`):
		return "error", body
	default:
		return "silent", resp.Status + " " + body
	}
}
