package e2e

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/pacegate/pacegate/policy/policytest"
)

// recordingTransport remembers when each attempt was sent and what came
// back, to see how the SDK retried.
type recordingTransport struct {
	mu       sync.Mutex
	attempts []attempt
}

type attempt struct {
	sent     time.Time
	status   int
	retryMS  string
	answered time.Time
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	rt.attempts = append(rt.attempts, attempt{sent: sent, status: resp.StatusCode, retryMS: resp.Header.Get("retry-after-ms"), answered: time.Now()})
	rt.mu.Unlock()
	return resp, nil
}

func TestOverCapGetsRateLimitErrorAndHeaders(t *testing.T) {
	s := startStack(t, `
defaults: {rpm: 2, tpm: 100000, rate: 100}
`+tenantsYAML, newSim(t, fastSim()))
	policytest.InOneWindow(t, 10*time.Second) // the third request is the one over the RPM cap
	c := sdkClient(s, "sk-alice")
	for i := range 2 {
		if _, err := c.Chat.Completions.New(t.Context(), chatParams(1)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	resp := s.post(t.Context(), "/v1/chat/completions", "sk-alice", `{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("x-ratelimit-limit-requests") != "2" || h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("x-ratelimit headers = %v", h)
	}
	ms, err := strconv.Atoi(h.Get("retry-after-ms"))
	if err != nil || ms <= 0 || ms > 60000 {
		t.Errorf("retry-after-ms = %q, want 1..60000", h.Get("retry-after-ms"))
	}
	if sec, _ := strconv.Atoi(h.Get("Retry-After")); sec != (ms+999)/1000 {
		t.Errorf("Retry-After = %q, want ceil(%d ms)", h.Get("Retry-After"), ms)
	}
	wantPrefix := `{"error":{"message":"Rate limit reached for sim-model in tenant alice on requests per min (RPM): Limit 2, Remaining 0. Please try again in `
	if len(body) < len(wantPrefix) || body[:len(wantPrefix)] != wantPrefix {
		t.Errorf("body = %s\nwant prefix %s", body, wantPrefix)
	}
	if want := `","type":"requests","param":null,"code":"rate_limit_exceeded"}}`; len(body) < len(want) || body[len(body)-len(want):] != want {
		t.Errorf("body = %s\nwant suffix %s", body, want)
	}
	// The SDK maps it to its rate-limit error.
	_, err = c.Chat.Completions.New(t.Context(), chatParams(1))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type != "requests" || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("SDK error = %v, want 429 requests rate_limit_exceeded", err)
	}
}

// The burst bucket refills at rpm/60 per second: with rpm 30 and burst 1 a
// second request right after the first is told to come back in about two
// seconds (more than 0.5 s unless 1.5 s passed between them). The SDK's
// own backoff would wait at most 0.5 s, so a retry that waited
// retry-after-ms proves the SDK honoured the header.
func TestSDKRetryHonoursRetryAfterMs(t *testing.T) {
	s := startStack(t, `
defaults: {rpm: 30, burst: 1, rate: 100}
`+tenantsYAML, newSim(t, fastSim()))
	if _, err := sdkClient(s, "sk-alice").Chat.Completions.New(t.Context(), chatParams(1)); err != nil {
		t.Fatal(err)
	}
	rt := &recordingTransport{}
	c := sdkClient(s, "sk-alice", option.WithMaxRetries(2), option.WithHTTPClient(&http.Client{Transport: rt}))
	if _, err := c.Chat.Completions.New(t.Context(), chatParams(1)); err != nil {
		t.Fatalf("retried request failed: %v", err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.attempts) != 2 || rt.attempts[0].status != 429 || rt.attempts[1].status != 200 {
		t.Fatalf("attempts = %+v, want a 429 then a 200", rt.attempts)
	}
	ms, _ := strconv.Atoi(rt.attempts[0].retryMS)
	if ms < 500 {
		t.Fatalf("retry-after-ms = %d, want about 2000 (burst refill at 0.5/s)", ms)
	}
	if gap := rt.attempts[1].sent.Sub(rt.attempts[0].answered); gap < time.Duration(ms)*time.Millisecond-5*time.Millisecond {
		t.Errorf("SDK retried after %s, before retry-after-ms=%d", gap, ms)
	}
}
