package gateway

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// setRateLimitHeaders writes the tenant+model windows of an admission
// made at now in the dialect's rate-limit headers: OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}, or Anthropic's
// anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}. A zero
// limit means no cap: its headers are left out rather than advertising a
// limit that does not exist.
func (d dialect) setRateLimitHeaders(h http.Header, a policy.Admission, now time.Time) {
	if d == dialectAnthropic {
		setAnthropicWindow(h, "requests", a.Requests, now)
		setAnthropicWindow(h, "tokens", a.Tokens, now)
		return
	}
	setWindow(h, "requests", a.Requests)
	setWindow(h, "tokens", a.Tokens)
}

func setWindow(h http.Header, kind string, w policy.Window) {
	if w.Limit <= 0 {
		return
	}
	h.Set("x-ratelimit-limit-"+kind, itoa(w.Limit))
	h.Set("x-ratelimit-remaining-"+kind, itoa(max(w.Remaining, 0)))
	h.Set("x-ratelimit-reset-"+kind, formatReset(w.Reset))
}

// setAnthropicWindow writes one window as Anthropic does: the reset is
// the instant the window is full again, an RFC 3339 timestamp in UTC,
// rounded up to the second so that a client waiting until then is never
// early.
func setAnthropicWindow(h http.Header, kind string, w policy.Window, now time.Time) {
	if w.Limit <= 0 {
		return
	}
	prefix := "anthropic-ratelimit-" + kind + "-"
	h.Set(prefix+"limit", itoa(w.Limit))
	h.Set(prefix+"remaining", itoa(max(w.Remaining, 0)))
	h.Set(prefix+"reset", resetInstant(now, w.Reset).Format(time.RFC3339))
}

// resetInstant is now+d rounded up to the second, in UTC.
func resetInstant(now time.Time, d time.Duration) time.Time {
	t := now.Add(max(d, 0)).UTC()
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}

// setRetryAfter writes Retry-After (whole seconds, rounded up, as RFC 9110
// wants) and retry-after-ms (exact), which the OpenAI SDKs read first.
func setRetryAfter(h http.Header, d time.Duration) {
	if d < time.Millisecond {
		d = time.Millisecond
	}
	h.Set("Retry-After", itoa(int64(math.Ceil(d.Seconds()))))
	h.Set("retry-after-ms", itoa(int64(math.Ceil(float64(d)/float64(time.Millisecond)))))
}

// formatReset renders a reset time the way OpenAI does: a Go duration
// string ("1s", "6m0s", "12ms"), rounded to milliseconds.
func formatReset(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Millisecond).String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
