package consume

import (
	"context"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Pacer is the leaky-bucket decision the consumer asks before releasing a
// request (implemented by *policy.Pacer and *cluster.Pacer). Both
// questions take the time of asking: the consumer reads the clock once
// for all the decisions of a delivery, microseconds apart, where each
// reading costs tens of nanoseconds on a VM.
type Pacer interface {
	// WaitAt returns how long after now k's next release slot is, taking
	// nothing.
	WaitAt(now time.Time, k policy.Key, cost float64) time.Duration
	// AcquireOrSuspendAt returns 0 and takes the bucket's next release
	// slot, or returns how long after now that slot is and takes nothing.
	AcquireOrSuspendAt(now time.Time, k policy.Key, cost float64) time.Duration
	// Interval is the time between two releases of k at its current
	// rate (0 when unpaced).
	Interval(k policy.Key) time.Duration
}

// Upstreams is the model pool as the consumer sees it (implemented by
// consume/upstream.Pool).
type Upstreams interface {
	// TryAcquire reserves capacity on an upstream serving model without
	// blocking. It returns false when every such upstream is at its
	// concurrency limit or down.
	TryAcquire(model string) (Slot, bool)
	// TryAcquireHeadroom is TryAcquire with each upstream's headroom (room
	// beyond its concurrency limit) counted as free. Only the fair-share
	// gate calls it, for a bucket below its share of the model's slots.
	TryAcquireHeadroom(model string) (Slot, bool)
	// Free reports the free and total slots of the available upstreams
	// serving model, within their concurrency limits: total minus free is
	// how many requests of model run, and free is negative when some of
	// them run in the headroom.
	Free(model string) (free, total int)
	// OnFree installs f, called with the models of an upstream whenever
	// capacity may have freed on it (a slot was released, the upstream
	// came back or its models changed). f is called without the pool's
	// locks held and must not block for long.
	OnFree(f func(models []string))
}

// Emitter takes a response's events as its upstream call produces them
// ([Slot.Do]). It is an interface rather than a function so that the
// consumer passes its invocation itself: a method value would be one more
// allocation per request, on the queue's hop, and one more object for
// each chunk's call to reach.
type Emitter interface {
	Emit(Event) error
}

// EmitFunc is a function as an Emitter.
type EmitFunc func(Event) error

// Emit calls f.
func (f EmitFunc) Emit(ev Event) error { return f(ev) }

// Slot is reserved upstream capacity for exactly one request.
type Slot interface {
	// Do performs the request and hands emit each response event in
	// order (EventHeader, then EventChunk... or EventBody). It returns nil
	// after the response ended cleanly, or the error that ended it. A
	// failure before the first response byte may be retried on another
	// upstream inside Do; after it never. Cancelling ctx aborts the
	// upstream call. Do releases the slot when it returns. An
	// EventChunk's Data is valid only during its Emit call (it aliases
	// the relay's read buffer, so that a chunk costs no allocation):
	// emit copies what it keeps, as [Pending.Send] does.
	Do(ctx context.Context, req *Request, emit Emitter) error
	// Release gives the slot back without using it. Calling it after Do
	// (or twice) is a no-op.
	Release()
}

// CacheReporter is implemented by a Slot that learns from the prefix
// cache hits its upstream reports: after Do, the consumer tells it the
// response's prompt tokens and how many of them were cached.
type CacheReporter interface {
	Cached(req *Request, prompt, cached int64)
}

// Calmer is implemented by Upstreams that learn how much their servers
// slow down as their batches fill (consume/upstream.Pool, from vLLM's
// inter-token latency): the capacity gate asks it while a band with a
// MaxSlowdown is active.
type Calmer interface {
	// Calm returns how many requests of model run, and the largest batch
	// the available upstreams serving it may run together for the steps
	// of a band's requests to take at most factor times as long as with
	// the band's own requests alone (own of them at once): each
	// upstream's limit, or less where it knows it slows.
	Calm(model string, factor float64, own int) (running, calm int)
}

// Waker is implemented by a Backend that can end a LiteTopic's suspension
// early (the embedded engine). After a rate increase the Queue wakes the
// suspended buckets it touches, and the fair-share gate wakes the bucket
// it grants a slot to. RocketMQ holds suspensions in the broker and
// cannot; there the consumer caps each suspension instead.
type Waker interface {
	Wake(liteTopic string) bool
}

// Pauser is implemented by a Backend that honours [SuccessThenPause]:
// it keeps the LiteTopic's next message for the pause (the embedded
// engine). The consumer pauses a bucket after a release only on such a
// backend; on another one the next message's delivery is suspended, as
// it would be anyway, and a pause would be recorded twice.
type Pauser interface {
	PausesAfterSuccess()
}
