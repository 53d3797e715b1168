package gateway

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// setRateLimitHeaders writes OpenAI's x-ratelimit-* headers from the
// tenant+model windows. A zero limit means no cap: the headers are left
// out rather than advertising a limit that does not exist.
func setRateLimitHeaders(h http.Header, a policy.Admission) {
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
