package gateway

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

func TestRateLimitHeaders(t *testing.T) {
	h := http.Header{}
	dialectOpenAI.setRateLimitHeaders(h, policy.Admission{
		Requests: policy.Window{Limit: 60, Remaining: 59, Reset: 1500 * time.Millisecond},
		Tokens:   policy.Window{Limit: 150000, Remaining: -3, Reset: 6 * time.Minute},
	}, time.Now())
	want := map[string]string{
		"X-Ratelimit-Limit-Requests":     "60",
		"X-Ratelimit-Remaining-Requests": "59",
		"X-Ratelimit-Reset-Requests":     "1.5s",
		"X-Ratelimit-Limit-Tokens":       "150000",
		"X-Ratelimit-Remaining-Tokens":   "0",
		"X-Ratelimit-Reset-Tokens":       "6m0s",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("headers = %v, want exactly %d", h, len(want))
	}
}

// Anthropic's headers name the instant each window is full again, as an
// RFC 3339 timestamp in UTC rounded up to the second, whatever the
// zone of now.
func TestAnthropicRateLimitHeaders(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 4, 58, 250_000_000, time.FixedZone("CET", 3600))
	h := http.Header{}
	dialectAnthropic.setRateLimitHeaders(h, policy.Admission{
		Requests: policy.Window{Limit: 60, Remaining: 59, Reset: 1750 * time.Millisecond},
		Tokens:   policy.Window{Limit: 150000, Remaining: -3, Reset: 5*time.Minute + 750*time.Millisecond},
	}, now)
	want := http.Header{
		"Anthropic-Ratelimit-Requests-Limit":     {"60"},
		"Anthropic-Ratelimit-Requests-Remaining": {"59"},
		"Anthropic-Ratelimit-Requests-Reset":     {"2026-12-02T06:05:00Z"},
		"Anthropic-Ratelimit-Tokens-Limit":       {"150000"},
		"Anthropic-Ratelimit-Tokens-Remaining":   {"0"},
		"Anthropic-Ratelimit-Tokens-Reset":       {"2026-12-02T06:09:59Z"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers = %v\nwant %v", h, want)
	}
}

// A reset on a whole second stays on it; one already past is now.
func TestResetInstant(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "2026-12-02T06:00:00Z"},
		{time.Nanosecond, "2026-12-02T06:00:01Z"},
		{time.Second, "2026-12-02T06:00:01Z"},
		{time.Minute, "2026-12-02T06:01:00Z"},
		{-time.Second, "2026-12-02T06:00:00Z"},
	} {
		if got := resetInstant(now, tc.d).Format(time.RFC3339); got != tc.want {
			t.Errorf("resetInstant(now, %s) = %s, want %s", tc.d, got, tc.want)
		}
	}
}

func TestNoCapNoHeaders(t *testing.T) {
	for _, d := range []dialect{dialectOpenAI, dialectAnthropic} {
		h := http.Header{}
		d.setRateLimitHeaders(h, policy.Admission{}, time.Now())
		if len(h) != 0 {
			t.Errorf("dialect %d: headers = %v, want none for uncapped windows", d, h)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		d       time.Duration
		sec, ms string
	}{
		{1200 * time.Millisecond, "2", "1200"},
		{time.Second, "1", "1000"},
		{1500 * time.Microsecond, "1", "2"},
		{0, "1", "1"},
	} {
		h := http.Header{}
		setRetryAfter(h, tc.d)
		if h.Get("Retry-After") != tc.sec || h.Get("retry-after-ms") != tc.ms {
			t.Errorf("%s: Retry-After=%q retry-after-ms=%q, want %s and %s", tc.d, h.Get("Retry-After"), h.Get("retry-after-ms"), tc.sec, tc.ms)
		}
	}
}
