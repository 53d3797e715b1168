package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicClient talks to the stack as Anthropic's SDK does: x-api-key
// and anthropic-version, base URL without /v1.
func anthropicClient(s *stack, key string, opts ...aopt.RequestOption) *anthropic.Client {
	base := []aopt.RequestOption{aopt.WithoutEnvironmentDefaults(), aopt.WithBaseURL(s.url + "/"),
		aopt.WithAPIKey(key), aopt.WithMaxRetries(0)}
	c := anthropic.NewClient(append(base, opts...)...)
	return &c
}

func messageParams(text string, maxTokens int64) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "sim-model",
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

func textOf(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestSDKMessagesNonStreaming(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	m, err := anthropicClient(s, "sk-alice").Messages.New(t.Context(), messageParams("hello there world", 3))
	if err != nil {
		t.Fatal(err)
	}
	if textOf(m) != "tok0 tok1 tok2" || m.Usage.InputTokens != 3 || m.Usage.OutputTokens != 3 || m.StopReason != "max_tokens" {
		t.Errorf("text %q usage %+v stop %q", textOf(m), m.Usage, m.StopReason)
	}
}

// Anthropic's stream decoder gets every event (ping included, which it
// skips) and the accumulated message is exact.
func TestSDKMessagesStreaming(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	stream := anthropicClient(s, "sk-alice").Messages.NewStreaming(t.Context(), messageParams("hello there world", 4))
	var m anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := m.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "message_start content_block_start " + strings.Repeat("content_block_delta ", 4) + "content_block_stop message_delta message_stop"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events %q\nwant %q", got, want)
	}
	if textOf(&m) != "tok0 tok1 tok2 tok3" || m.Usage.InputTokens != 3 || m.Usage.OutputTokens != 4 {
		t.Errorf("text %q usage %+v", textOf(&m), m.Usage)
	}
}

func TestSDKMessagesCountTokens(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	n, err := anthropicClient(s, "sk-alice").Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{
		Model:    "sim-model",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three four"))},
	})
	if err != nil || n.InputTokens != 4 {
		t.Fatalf("count_tokens = %+v, %v; want 4", n, err)
	}
}

// A 429 is Anthropic's rate_limit_error, with retry-after, and the SDK
// retries it; an unknown key is its authentication error.
func TestSDKMessagesRateLimitAndAuth(t *testing.T) {
	s := startStack(t, "\ndefaults: {rpm: 60, burst: 1, rate: 100}\n"+tenantsYAML, newSim(t, fastSim()))
	if _, err := anthropicClient(s, "sk-alice").Messages.New(t.Context(), messageParams("hi", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := anthropicClient(s, "sk-alice").Messages.New(t.Context(), messageParams("hi", 1))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" ||
		!strings.HasPrefix(apiErr.Message, "Rate limit reached for sim-model in tenant alice") {
		t.Fatalf("without retries: %v, want 429 rate_limit_error", err)
	}
	if apiErr.Response.Header.Get("retry-after") == "" {
		t.Errorf("429 without retry-after: %v", apiErr.Response.Header)
	}
	rt := &recordingTransport{}
	c := anthropicClient(s, "sk-alice", aopt.WithMaxRetries(2), aopt.WithHTTPClient(&http.Client{Transport: rt}))
	if _, err := c.Messages.New(t.Context(), messageParams("hi", 1)); err != nil {
		t.Fatalf("retried request failed: %v", err)
	}
	rt.mu.Lock()
	if n := len(rt.attempts); n < 2 || rt.attempts[0].status != 429 || rt.attempts[n-1].status != 200 {
		t.Errorf("attempts = %+v, want 429 ... 200", rt.attempts)
	}
	rt.mu.Unlock()

	_, err = anthropicClient(s, "sk-nobody").Messages.New(t.Context(), messageParams("hi", 1))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Errorf("unknown key: %v, want 401 authentication_error", err)
	}
}

// anthropic-sdk-go finds the request id where Anthropic sends it
// (request-id, the same id as X-Request-Id) on a success and on an
// error, and Anthropic's rate-limit headers replace OpenAI's on the
// success and on the 429: the limit, what remains, and the end of the
// calendar minute as an RFC 3339 timestamp.
func TestSDKMessagesRequestIDAndRateLimitHeaders(t *testing.T) {
	s := startStack(t, "\ndefaults: {rpm: 60, tpm: 100000, burst: 1}\n"+tenantsYAML, newSim(t, fastSim()))
	c := anthropicClient(s, "sk-alice")
	var resp *http.Response
	before := time.Now()
	if _, err := c.Messages.New(t.Context(), messageParams("hi", 1), aopt.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Messages.New(t.Context(), messageParams("hi", 1)) // the burst of 1 is spent
	after := time.Now()
	first := resp.Header
	if id := first.Get("request-id"); id == "" || id != first.Get("X-Request-Id") {
		t.Errorf("success: request-id %q, X-Request-Id %q; want the same id", id, first.Get("X-Request-Id"))
	}
	reset := first.Get("anthropic-ratelimit-requests-reset")
	if next := minuteAfter(before, after); reset != next[0] && reset != next[1] {
		t.Errorf("requests reset %q, want the next minute %q", reset, next)
	}
	expectHeaders(t, "success", first, map[string]string{
		"anthropic-ratelimit-requests-limit": "60", "anthropic-ratelimit-requests-remaining": "59",
		"anthropic-ratelimit-tokens-limit": "100000", "anthropic-ratelimit-tokens-reset": reset,
		"x-ratelimit-limit-requests": "", "x-ratelimit-remaining-tokens": "",
	})

	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" {
		t.Fatalf("second request: %v, want a 429 rate_limit_error", err)
	}
	h := apiErr.Response.Header
	if apiErr.RequestID == "" || apiErr.RequestID != h.Get("X-Request-Id") || apiErr.RequestID == first.Get("request-id") {
		t.Errorf("429: RequestID %q, X-Request-Id %q, first id %q; want its own id in both", apiErr.RequestID, h.Get("X-Request-Id"), first.Get("request-id"))
	}
	// A denial charges nothing: what remains is what the success left,
	// unless the minute turned in between.
	remaining := "59"
	if h.Get("anthropic-ratelimit-requests-reset") != reset {
		remaining = "60"
	}
	expectHeaders(t, "429", h, map[string]string{
		"anthropic-ratelimit-requests-limit": "60", "anthropic-ratelimit-requests-remaining": remaining,
		"anthropic-ratelimit-tokens-limit": "100000", "retry-after": "1",
		"x-ratelimit-limit-requests": "", "x-ratelimit-reset-requests": "",
	})
}

// minuteAfter is the start of the minute after before and after, as
// RFC 3339 in UTC: what a reset at some instant between them must be.
func minuteAfter(before, after time.Time) [2]string {
	f := func(t time.Time) string { return t.UTC().Truncate(time.Minute).Add(time.Minute).Format(time.RFC3339) }
	return [2]string{f(before), f(after)}
}

func expectHeaders(t *testing.T, what string, h http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}
