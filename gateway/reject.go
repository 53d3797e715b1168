package gateway

import (
	"fmt"
	"net/http"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// rateLimitError is the OpenAI-shaped body of a cap denial.
func rateLimitError(x *exchange) *APIError {
	a := x.adm
	w := a.Requests
	unit := "requests per min (RPM)"
	if a.Reason.Kind() == "tokens" {
		w, unit = a.Tokens, "tokens per min (TPM)"
	}
	scope := "tenant " + x.key.Tenant
	if len(a.Reason) > 4 && a.Reason[:4] == "ORG_" {
		scope = "organization " + x.tenant.Org
	}
	msg := fmt.Sprintf("Rate limit reached for %s in %s on %s", x.key.Model, scope, unit)
	if a.Reason == "BURST_LIMIT" {
		msg = fmt.Sprintf("Rate limit reached for %s in %s: too many requests at once (burst)", x.key.Model, scope)
	} else if w.Limit > 0 {
		msg += fmt.Sprintf(": Limit %d, Remaining %d", w.Limit, max(w.Remaining, 0))
	}
	msg += fmt.Sprintf(". Please try again in %s.", a.RetryAfter.Round(time.Millisecond))
	return &APIError{Status: http.StatusTooManyRequests, Message: msg, Type: a.Reason.Kind(), Code: "rate_limit_exceeded",
		RetryAfter: a.RetryAfter, Reason: string(a.Reason)}
}

// queueError is the body of a 429 from the queue rather than a cap.
func queueError(x *exchange, why string) *APIError {
	return &APIError{Status: http.StatusTooManyRequests, Type: "requests", Code: "queue_full", Reason: "QUEUE_FULL",
		Message: fmt.Sprintf("Request queue full for %s in tenant %s: %s.", x.key.Model, x.key.Tenant, why)}
}

func queueFull(x *exchange, full *consume.FullError, retryAfter time.Duration) *APIError {
	why := fmt.Sprintf("the bucket already holds its limit of %d queued requests", full.Limit)
	if full.Scope != consume.ScopeBucket {
		// The backend's own limit (its memory, or the broker's quota of
		// queues), not this bucket's: the request is fine, the gateway full.
		why = "the gateway's queue is at its capacity"
	}
	e := queueError(x, why)
	e.RetryAfter = retryAfter
	return e
}

// maxWaitError refuses a request that its bucket's backlog would keep
// waiting longer than max_wait.
func maxWaitError(x *exchange, wait, maxWait, over time.Duration) *APIError {
	e := queueError(x, fmt.Sprintf("the queue for %s would take %s to reach this request, longer than its max_wait of %s",
		x.key.Model, wait.Round(time.Millisecond), maxWait))
	e.Reason, e.RetryAfter = "MAX_WAIT", over
	return e
}
