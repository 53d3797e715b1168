package policy

import (
	"errors"
	"time"
)

// Reason says why a request was denied, or "OK".
type Reason string

// Reasons. The gateway sends them as the OpenAI error "code".
const (
	ReasonOK     Reason = "OK"
	ReasonRPM    Reason = "RPM_LIMIT"
	ReasonTPM    Reason = "TPM_LIMIT"
	ReasonBurst  Reason = "BURST_LIMIT"
	ReasonOrgRPM Reason = "ORG_RPM_LIMIT"
	ReasonOrgTPM Reason = "ORG_TPM_LIMIT"
)

// Kind returns "tokens" for the token caps and "requests" otherwise: the
// OpenAI 429 body "type" and the x-ratelimit-*-{requests,tokens} family.
func (r Reason) Kind() string {
	if r == ReasonTPM || r == ReasonOrgTPM {
		return "tokens"
	}
	return "requests"
}

// Decision is the answer of one limiter check. The zero value is a
// denial with no reason; limiters always fill Reason.
type Decision struct {
	Allowed   bool
	Limit     int64 // the cap that applied (0 = none)
	Remaining int64 // what is left after this call (the smaller leftover, for composed checks)
	// RetryAfter is, for a denial, exactly how long until the same call
	// would be allowed if nothing else happens meanwhile; 0 when allowed.
	RetryAfter time.Duration
	Reset      time.Duration // until the limiter is back to full
	Reason     Reason
}

// ErrInvalidCost is returned for a cost that is not a positive number.
var ErrInvalidCost = errors.New("policy: cost must be > 0")

// Limiter is the fixed-parameter, one-request form that every algorithm
// offers ([FixedWindow], [TokenBucket]); the contract test suite runs
// through it.
type Limiter interface {
	// AllowAt decides one request of cost 1 for k at now.
	AllowAt(now time.Time, k Key) Decision
}

// durationOf converts seconds to a Duration, rounding up so that a wait
// never ends a nanosecond early, and saturating instead of overflowing.
func durationOf(sec float64) time.Duration {
	const max = float64(1<<63 - 1)
	ns := sec * 1e9
	if !(ns < max) { // also +Inf and NaN
		return time.Duration(1<<63 - 1)
	}
	d := time.Duration(ns)
	if float64(d) < ns {
		d++
	}
	return d
}
