package upstream

import (
	"errors"
	"fmt"
)

// ErrUpstreamUnavailable wraps a transport failure before any response
// byte (dial error, connection reset before the headers) that could not
// be retried elsewhere.
var ErrUpstreamUnavailable = errors.New("upstream: unavailable")

// ErrStreamBroken wraps a failure after the first response byte: a reset
// mid-stream, a malformed or oversized response. It is never retried.
var ErrStreamBroken = errors.New("upstream: response broke off")

// ErrStreamStalled wraps ErrStreamBroken: the upstream sent nothing for
// its IdleTimeout in the middle of a stream, and the call was aborted.
var ErrStreamStalled = fmt.Errorf("%w: stalled", ErrStreamBroken)

// ErrStreamMalformed wraps ErrStreamBroken: the upstream's stream was not
// what it promised (a data event that is not JSON, a body that declared
// JSON and is not, or an end without "data: [DONE]").
var ErrStreamMalformed = fmt.Errorf("%w: malformed", ErrStreamBroken)

// ErrBodyNotJSON wraps ErrStreamMalformed: a non-streamed body that
// declared JSON (or no type) and is not JSON.
var ErrBodyNotJSON = fmt.Errorf("%w: the body is not JSON", ErrStreamMalformed)

// ErrBodyTooLarge wraps ErrStreamBroken: a non-streamed body longer than
// the pool's MaxBodyBytes.
var ErrBodyTooLarge = fmt.Errorf("%w: the body exceeds the size limit", ErrStreamBroken)

// ErrClosed is returned by Start after Close, or when called twice.
var ErrClosed = errors.New("upstream: pool closed or already started")

// StatusError is a non-2xx answer from an upstream, returned when it
// could not be retried (any 4xx, or a 5xx with no other upstream free).
// Its zero value is not meaningful; it is only returned by Slot.Do.
type StatusError struct {
	Status   int
	Body     []byte // the upstream's error body, at most MaxErrorBodyBytes
	Upstream string // the upstream's URL
}

// MaxErrorBodyBytes bounds StatusError.Body.
const MaxErrorBodyBytes = 64 << 10

func (e *StatusError) Error() string {
	body := e.Body
	if len(body) > 200 {
		body = body[:200]
	}
	return fmt.Sprintf("upstream %s answered %d: %s", e.Upstream, e.Status, body)
}
