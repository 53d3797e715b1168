package gateway

import "time"

// Outcomes of a generation request, as reported to the Observer and the
// access log.
const (
	OutcomeOK            = "ok"
	OutcomeRejected      = "rejected"       // 429: a cap, the predicted wait, or a full queue
	OutcomeUnavailable   = "unavailable"    // 503: queue backend down or draining
	OutcomeUpstreamError = "upstream_error" // the model pool failed the request
	OutcomeTimeout       = "timeout"        // the overall request timeout fired
	OutcomeClientGone    = "client_gone"    // the client disconnected first
	OutcomeInternalError = "internal_error" // pacegate failed writing the response (a bug, logged)
)

// Observer receives the gateway's metrics events. Implementations must be
// safe for concurrent use and must not block.
type Observer interface {
	// Request is called once per admitted-or-rejected generation request.
	Request(tenant, model, outcome string)
	// Rejected is called for each 429 with the policy reason
	// (RPM_LIMIT, TPM_LIMIT, BURST_LIMIT, ORG_*, QUEUE_FULL, MAX_WAIT).
	Rejected(tenant, model, reason string)
	// QueueWait is the time from admission to release to the upstream.
	QueueWait(tenant, model string, d time.Duration)
	// TTFT is the time from admission to the first response byte.
	TTFT(tenant, model string, d time.Duration)
}

type nopObserver struct{}

func (nopObserver) Request(string, string, string)          {}
func (nopObserver) Rejected(string, string, string)         {}
func (nopObserver) QueueWait(string, string, time.Duration) {}
func (nopObserver) TTFT(string, string, time.Duration)      {}
