package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

func TestRateLimitHeaders(t *testing.T) {
	h := http.Header{}
	setRateLimitHeaders(h, policy.Admission{
		Requests: policy.Window{Limit: 60, Remaining: 59, Reset: 1500 * time.Millisecond},
		Tokens:   policy.Window{Limit: 150000, Remaining: -3, Reset: 6 * time.Minute},
	})
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

func TestNoCapNoHeaders(t *testing.T) {
	h := http.Header{}
	setRateLimitHeaders(h, policy.Admission{})
	if len(h) != 0 {
		t.Errorf("headers = %v, want none for uncapped windows", h)
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
