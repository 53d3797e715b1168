package consume

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// EventKind says what an Event carries.
type EventKind uint8

const (
	// EventHeader: the upstream answered; Status and Header are set.
	// It comes first, before any EventChunk or EventBody.
	EventHeader EventKind = iota
	// EventChunk: one SSE event's data payload from the upstream, as
	// received (without the "data: " prefix and the blank line).
	EventChunk
	// EventBody: the complete body of a non-streamed response.
	EventBody
	// EventError: the request failed; Err says why. Terminal.
	EventError
	// EventDone: the upstream finished cleanly. Terminal.
	EventDone
)

// Event is one step of a response on its way from the consumer to the
// waiting HTTP handler.
type Event struct {
	Kind   EventKind
	Status int
	Header http.Header
	Data   []byte
	Err    error
	// At is when the consumer produced the event (for time-to-first-token).
	At time.Time
}

// Pending is a request that has been published and whose handler is
// waiting for its response. It is created by the gateway, found by the
// consumer through the Registry, and is safe for concurrent use.
type Pending struct {
	ID     string
	Tenant string
	Model  string
	// Ctx is the client's request context (with the overall timeout). It
	// is cancelled when the client goes away; the consumer then drops the
	// request or aborts the upstream call.
	Ctx context.Context

	events     chan Event
	dispatched atomic.Bool
	released   atomic.Int64 // unix nanos of the release to the upstream
}

// DefaultEventBuffer is the response channel's capacity: enough for a burst
// of chunks while the handler flushes; the producer blocks (bounded) beyond.
// Kept small: the channel is allocated (and zeroed) for every request.
const DefaultEventBuffer = 16

// NewPending returns a Pending whose response channel holds buffer events.
func NewPending(ctx context.Context, id, tenant, model string, buffer int) *Pending {
	if buffer <= 0 {
		buffer = DefaultEventBuffer
	}
	return &Pending{ID: id, Tenant: tenant, Model: model, Ctx: ctx, events: make(chan Event, buffer)}
}

// Events is the channel the HTTP handler reads.
func (p *Pending) Events() <-chan Event { return p.events }

// Send delivers ev to the handler. It blocks while the channel is full and
// returns the context's error if the client has gone: a chunk is never
// dropped while someone is listening.
func (p *Pending) Send(ev Event) error {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	select {
	case p.events <- ev:
		return nil
	case <-p.Ctx.Done():
		return p.Ctx.Err()
	}
}

// MarkDispatched records that the request was handed to an upstream. It
// returns false if it already was: a redelivery that must not call the
// model a second time.
func (p *Pending) MarkDispatched(at time.Time) bool {
	if !p.dispatched.CompareAndSwap(false, true) {
		return false
	}
	p.released.Store(at.UnixNano())
	return true
}

// Dispatched reports whether the request has been handed to an upstream.
func (p *Pending) Dispatched() bool { return p.dispatched.Load() }

// ReleasedAt is when the request left its bucket (zero if it has not).
func (p *Pending) ReleasedAt() time.Time {
	n := p.released.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Registry maps request ids to the handlers waiting for them: the
// in-process response channel of the single-process design. It is a
// sync.Map because entries are written once and read by a different
// goroutine, the case sync.Map is built for. Safe for concurrent use.
type Registry struct {
	m     sync.Map // string → *Pending
	count atomic.Int64
}

// Register adds p. The handler must Delete it when it returns.
func (r *Registry) Register(p *Pending) {
	if _, loaded := r.m.LoadOrStore(p.ID, p); !loaded {
		r.count.Add(1)
	}
}

// Load finds the request with id.
func (r *Registry) Load(id string) (*Pending, bool) {
	v, ok := r.m.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*Pending), true
}

// Delete removes id; a later delivery of it is dropped.
func (r *Registry) Delete(id string) {
	if _, ok := r.m.LoadAndDelete(id); ok {
		r.count.Add(-1)
	}
}

// Len is the number of requests waiting.
func (r *Registry) Len() int { return int(r.count.Load()) }

// Range calls f for each waiting request until f returns false.
func (r *Registry) Range(f func(p *Pending) bool) {
	r.m.Range(func(_, v any) bool { return f(v.(*Pending)) })
}
