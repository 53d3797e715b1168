package consume

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Message is one request on its way to the GPUs: it is published to a
// LiteTopic (one per tenant+model, see [LiteTopicName]) under the backend's
// parent topic.
type Message struct {
	// ID is the request id (a UUID). It is the key of the response
	// registry and the idempotency key of the consumer.
	ID string
	// LiteTopic is the queue the message goes to.
	LiteTopic string
	// Key is the bucket the message belongs to. The consumer reads the
	// request itself from the Queue's registry; Key names the bucket of a
	// message whose request is gone (for its drop), and the RocketMQ
	// backend carries it as the user properties PropTenant and PropModel,
	// for operators reading the broker.
	Key policy.Key
	// Body is the upstream request body.
	Body []byte
	// Properties are further user properties; the Queue sets none (a map
	// per request would be the hop's largest allocation), nil means none.
	Properties map[string]string
}

// Message property names.
const (
	PropTenant = "tenant"
	PropModel  = "model"
)

// Delivery is a Message handed to a [Handler].
type Delivery struct {
	Message
	// Attempt counts deliveries of this message, from 1. Suspensions do
	// not count; Retry results do.
	Attempt int
	// Inline says the handler runs on the goroutine that is publishing
	// the message, inside its Publish (the embedded engine delivers so to
	// an idle LiteTopic): work the handler leaves to that goroutine starts
	// as soon as Publish returns. A backend that delivers on a goroutine
	// of its own leaves it false, also while the publisher still waits
	// for its Publish to return (a broker's answer to the send can come
	// after the message was delivered).
	Inline bool
}

// Action is what a Handler decided about a delivery.
type Action uint8

const (
	// ActionSuccess acknowledges the message: it leaves the queue.
	ActionSuccess Action = iota
	// ActionSuspend keeps the message at the head of its LiteTopic and
	// delivers nothing from that LiteTopic for Result.Delay. No retry is
	// counted.
	ActionSuspend
	// ActionRetry reports a transient failure: the message is delivered
	// again after a backoff and the attempt is counted.
	ActionRetry
)

// Result is a Handler's answer for one delivery.
type Result struct {
	Action Action
	// Delay is, for ActionSuspend, how long the LiteTopic delivers
	// nothing. For ActionSuccess it is a hint (see [SuccessThenPause]): a
	// backend that can keeps the LiteTopic's next message that long; one
	// that cannot delivers it, and the handler suspends it then.
	Delay time.Duration
}

// Success acknowledges a delivery.
func Success() Result { return Result{Action: ActionSuccess} }

// SuccessThenPause acknowledges a delivery and pauses its LiteTopic for
// d: its next message, which the handler would only suspend for d, is
// not delivered before then. A paced bucket with a backlog then costs one
// delivery a release where it cost two (the release, then a suspension of
// the next message). The embedded engine honours it; a broker's next
// delivery comes at once, and is suspended.
func SuccessThenPause(d time.Duration) Result { return Result{Action: ActionSuccess, Delay: d} }

// Suspend pauses the delivery's LiteTopic for d; the message stays.
func Suspend(d time.Duration) Result { return Result{Action: ActionSuspend, Delay: d} }

// Retry asks for a redelivery after the backend's backoff.
func Retry() Result { return Result{Action: ActionRetry} }

func (r Result) String() string {
	switch r.Action {
	case ActionSuccess:
		if r.Delay > 0 {
			return fmt.Sprintf("success, pause(%s)", r.Delay)
		}
		return "success"
	case ActionSuspend:
		return fmt.Sprintf("suspend(%s)", r.Delay)
	default:
		return "retry"
	}
}

// Handler is called for each delivery. At most one message of a LiteTopic
// is being handled at any moment. It must return promptly: waiting is
// expressed by returning Suspend, never by blocking. d is the handler's
// only until it returns (the embedded engine reuses it for a later
// message): copy what must be kept.
type Handler func(ctx context.Context, d *Delivery) Result

// Backend is a LiteTopic queue: the embedded engine or RocketMQ. All methods
// are safe for concurrent use.
type Backend interface {
	// Publish enqueues m. It fails at once with a *FullError when the
	// backend is full (a bucket's own limit is the Queue's), with
	// ErrClosed after Close, and with ErrUnavailable when the backend
	// cannot be reached.
	Publish(ctx context.Context, m *Message) error
	// Start begins delivering messages to h. It may be called once.
	Start(h Handler) error
	// Close stops intake, stops delivery, waits for in-progress handler
	// calls, and reports the messages still queued. No goroutine started
	// by the backend outlives it.
	Close(ctx context.Context) (Leftover, error)
	// MinSuspend is the shortest Suspend the backend honours exactly;
	// shorter waits are made up by the consumer.
	MinSuspend() time.Duration
	// Ready reports whether the backend can take and deliver messages.
	Ready(ctx context.Context) error
}

// Leftover lists what was still queued when a backend closed.
type Leftover struct {
	IDs []string
}

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("consume: backend closed")

// ErrUnavailable is returned by Publish when the backend cannot be reached.
var ErrUnavailable = errors.New("consume: queue backend unavailable")

// Scope says which limit a FullError hit.
type Scope string

const (
	ScopeBucket Scope = "bucket" // the bucket's backlog limit
	ScopeEngine Scope = "engine" // the backend's global message or byte limit
)

// FullError is returned by Publish when a queue is full. Nothing already
// queued is dropped to make room.
type FullError struct {
	Scope      Scope
	LiteTopic  string
	Limit      int64
	RetryAfter time.Duration // when a retry is likely to find room
}

func (e *FullError) Error() string {
	return fmt.Sprintf("consume: %s queue full (limit %d) for %q", e.Scope, e.Limit, e.LiteTopic)
}

// ErrFull matches any *FullError with errors.Is.
var ErrFull = errors.New("consume: queue full")

// Is makes errors.Is(err, ErrFull) true for a *FullError.
func (e *FullError) Is(target error) bool { return target == ErrFull }
