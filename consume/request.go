package consume

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Request is one generation request as the gateway submits it: what to
// send upstream and what the queue needs to know to pace and share it. It
// is immutable once submitted.
type Request struct {
	ID  string     // request id (a UUID): registry key, idempotency key, X-Request-Id upstream
	Key policy.Key // its bucket
	// Path is the upstream path, e.g. /v1/chat/completions, with its
	// query if any.
	Path   string
	Body   []byte
	Stream bool
	// Method is the upstream method; empty means POST.
	Method string
	// ContentType is the body's type; empty means application/json (a
	// multipart audio upload carries its boundary here).
	ContentType string
	// Header holds extra request headers for the upstream (e.g.
	// anthropic-version). Nil means none.
	Header http.Header
	// Prefix is the chained hashes of the leading blocks of the rendered
	// prompt (package consume/upstream/prefix) and PromptBytes the
	// rendered prompt's whole length: what prefix routing sends to the
	// upstream most likely to hold it in its KV cache. Nil for routes
	// without a prompt to reuse (embeddings, rerank, audio ...).
	Prefix      []uint64
	PromptBytes int
	// Upstream pins the request to the upstream with this URL (a
	// follow-up of a stored response lives there only). Empty means any
	// upstream serving the model.
	Upstream string
	// Shape is the wire shape of the response: how its usage and
	// generated tokens are read and how its stream ends.
	Shape Shape
	// Band is the tenant's priority band for pool capacity (0 = high,
	// 1 = normal, 2 = low) and Weight its fair-share weight (> 0).
	Band   int
	Weight float64
	// PromptTokens estimates the prompt and CompletionTokens the
	// completion (max_tokens, or the gateway's default reservation). Both
	// are charged to the bucket's fair share when the request starts; the
	// tokens actually generated replace them as they stream and when the
	// upstream reports usage.
	PromptTokens     int64
	CompletionTokens int64
	// MaxBacklog is the bucket's backlog limit (<= 0: none).
	MaxBacklog int
	// Submitted is when the request entered its bucket.
	Submitted time.Time
}

// EventKind says what an Event carries.
type EventKind uint8

const (
	// EventHeader: the upstream answered; Status and Header are set.
	// It comes first, before any EventChunk or EventBody.
	EventHeader EventKind = iota
	// EventChunk: one SSE event's data payload from the upstream, as
	// received (without the "data: " prefix and the blank line), and
	// its "event:" name in Name (empty for unnamed events).
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
	// Upstream is, on EventHeader, the URL of the upstream that answered.
	Upstream string
	Name     string // EventChunk: the SSE event name, if any
	// Data is an EventChunk's or EventBody's payload. An EventChunk's
	// Data received from a Pending is valid until the next event is
	// received from it (the Pending reuses its buffers; copy to keep).
	Data []byte
	// Frame is, on an EventChunk, the SSE frame the upstream sent it in,
	// when that is the frame the gateway would write for it (see
	// sse.Event.Raw): it is then written as it came. Valid as long as
	// Data; nil on the Pending's channel, whose copy keeps Data alone.
	Frame []byte
	// More says, on an EventChunk, that the stream's next event is
	// already in the relay's hands and follows at once: a writer may
	// leave this one unflushed, so that both go out in one write. Ends
	// says that what follows at once is the stream's clean end (an
	// OpenAI stream's [DONE]): a writer may write the end with it. A
	// writer that holds an event must flush it with the next event it
	// gets, whatever that is, or at once if it drops that event.
	More, Ends bool
	// Final says, on an EventChunk, that the upstream's response ended
	// with this event (and with the end Ends announces): its body's end
	// came in the same read, so the call has nothing left to wait for and
	// the response ends at once. A writer may then leave the event, and
	// the end, for the response's own end to send, in one write with the
	// body's end.
	Final bool
	// Reading is what the event says of the response's usage, read once
	// by the relay in its pass over the bytes; zero when the producer
	// did not read it (see [Tally.Observe]).
	Reading Reading
	Err     error
	// At is when the consumer produced the event (for time-to-first-token);
	// Send leaves it zero on an EventChunk.
	At time.Time
}

// States of a Pending: it leaves stateQueued exactly once.
const (
	stateQueued int32 = iota
	stateDispatched
	stateAbandoned
)

// Pending is a submitted request whose handler waits for its response:
// the registry entry that the consumer finds by request id. It is safe for
// concurrent use. A zero Pending is for [Queue.SubmitInto]; it must not be
// copied.
type Pending struct {
	Req *Request
	// Ctx is the client's request context (with the overall timeout). It
	// is cancelled when the client goes away; the consumer then drops the
	// request or aborts the upstream call.
	Ctx context.Context

	seq    uint64 // its entry in the bucket's ledger
	events chan Event
	// msg is the message SubmitTo publishes (kept here: one allocation
	// fewer per request).
	msg Message
	// chunks holds the Data of the last chunks sent on events, reused in
	// turn so that a streamed chunk costs no allocation; allocated at the
	// first chunk (a request with a Sink never needs it). Only the sending
	// goroutine touches it (see Send).
	chunks *chunkRing
	state  atomic.Int32
	// handoff and run: see handOff.
	handoff atomic.Int32
	run     *invocation

	departed atomic.Bool  // its ledger entry was removed
	released atomic.Int64 // unix nanos of the release to the upstream

	// inv is the upstream call of a dispatched request, kept here (a
	// Pending is dispatched at most once, see claim): one allocation
	// fewer per request. It ends with what a stream's every chunk
	// touches (the meter's count, then p), and sink follows it: the
	// chunk's way from the meter to the sink is one region of memory,
	// not four lines of the cache apart (each cold by the stream's next
	// chunk on a busy gateway).
	inv  invocation
	sink Sink // when set, Send hands events to it instead of events
}

// eventBuffer is the response channel's capacity: enough for a burst of
// chunks while the handler flushes; the producer blocks (bounded by the
// client's context) beyond. Kept small: it is allocated for every request.
const eventBuffer = 16

// chunkBuffers is how many chunk buffers a Pending reuses in turn. The
// sender fills buffer i again only once the send of the chunk
// chunkBuffers-1 later has completed, which the channel's capacity
// allows only after the handler received the chunk after i's: so a
// chunk's Data stays valid until the next event is received.
const chunkBuffers = eventBuffer + 2

func newPending(ctx context.Context, req *Request, sink Sink) *Pending {
	p := new(Pending)
	p.init(ctx, req, sink)
	return p
}

// init readies a zero p for req.
func (p *Pending) init(ctx context.Context, req *Request, sink Sink) {
	p.Req, p.Ctx, p.sink = req, ctx, sink
	if sink == nil {
		p.events = make(chan Event, eventBuffer)
	}
}

// Sink takes a response's events on the goroutine that produces them,
// instead of a channel the handler reads: a streamed chunk then goes from
// the upstream's read to the client's write on one goroutine, as through a
// bare proxy, where the channel parks and wakes a second goroutine per
// chunk.
type Sink interface {
	// Attach is called once, with the request's Pending, before any
	// event is delivered (and before the request is published).
	Attach(*Pending)
	// Deliver is called with the response's events in order, one call at
	// a time (not always from the same goroutine). An EventChunk's Data
	// is valid only during the call. It returns an error when nobody
	// takes the response any more (the client left, or the handler ended
	// it); the caller then stops, as when Send returns the client's
	// context error.
	Deliver(Event) error
}

// Events is the channel the HTTP handler reads; nil (a receive never
// completes) when the request was submitted with a Sink.
func (p *Pending) Events() <-chan Event { return p.events }

// Send delivers ev to the handler: to its Sink, or on the channel. On the
// channel it blocks while the channel is full and returns the context's
// error if the client has gone: a chunk is never dropped while someone is
// listening. An EventChunk's Data is copied (into a reused buffer), so
// the caller may reuse its own; chunks are sent by one goroutine at a
// time (the upstream call's).
func (p *Pending) Send(ev Event) error {
	if ev.Kind != EventChunk && ev.At.IsZero() {
		ev.At = time.Now() // a chunk is not stamped: nobody reads it, and it is a clock read per chunk
	}
	if p.sink != nil {
		return p.sink.Deliver(ev)
	}
	if ev.Kind == EventChunk {
		ev.Data, ev.Frame = p.keep(ev.Data), nil
	}
	select {
	case p.events <- ev:
		return nil
	case <-p.Ctx.Done():
		return p.Ctx.Err()
	}
}

// chunkRoom is the room each chunk buffer starts with: the buffers are
// carved from one allocation at a stream's first chunk, and one that
// receives a longer chunk grows on its own.
const chunkRoom = 384

// chunkRing is a Pending's chunk buffers and the room they start in, one
// allocation; next is the buffer to use.
type chunkRing struct {
	bufs [chunkBuffers][]byte
	next int
	room [chunkBuffers * chunkRoom]byte
}

// keep copies a chunk's data into the next of p's chunk buffers.
func (p *Pending) keep(data []byte) []byte {
	r := p.chunks
	if r == nil {
		r = new(chunkRing)
		for i := range r.bufs {
			r.bufs[i] = r.room[i*chunkRoom : i*chunkRoom : (i+1)*chunkRoom]
		}
		p.chunks = r
	}
	b := append(r.bufs[r.next][:0], data...)
	r.bufs[r.next] = b
	r.next = (r.next + 1) % chunkBuffers
	return b
}

// States of a Pending's hand-off: see handOff.
const (
	submitting int32 = iota // SubmitTo has not returned
	submitted               // it has, running nothing
	handedOff               // it runs p.run before it returns
)

// handOff gives the upstream call run to the goroutine still in SubmitTo,
// if p has a Sink (nothing then waits on a channel): a request delivered
// while it is being published (the embedded engine delivers inline, on
// the publishing goroutine) starts its upstream call there at once,
// without a goroutine of its own to start and schedule. It reports false
// once SubmitTo has returned (or without a Sink): the caller runs run on a
// goroutine of its own.
func (p *Pending) handOff(run *invocation) bool {
	if p.sink == nil {
		return false
	}
	p.run = run // read by SubmitTo only after it sees handedOff
	return p.handoff.CompareAndSwap(submitting, handedOff)
}

// submittedBy ends p's submission on SubmitTo's goroutine: it runs the
// upstream call handed off meanwhile, if any, and returns once it ended.
func (p *Pending) submittedBy() {
	if !p.handoff.CompareAndSwap(submitting, submitted) {
		p.run.run()
		p.run = nil
	}
}

// claim moves a queued request to dispatched. It returns false if it was
// dispatched already (a redelivery that must not call the model again) or
// abandoned by its handler.
func (p *Pending) claim(at time.Time) bool {
	if !p.state.CompareAndSwap(stateQueued, stateDispatched) {
		return false
	}
	p.released.Store(at.UnixNano())
	return true
}

// Abandon withdraws a request that is still queued, so that the consumer
// will never dispatch it (e.g. its band's max_wait passed). It returns
// false once the request has been dispatched: the handler must then wait
// for its response as usual.
func (p *Pending) Abandon() bool {
	return p.state.CompareAndSwap(stateQueued, stateAbandoned)
}

// Dispatched reports whether the request has been handed to an upstream.
func (p *Pending) Dispatched() bool { return p.state.Load() == stateDispatched }

// gone reports whether nobody waits for the request any more.
func (p *Pending) gone() bool {
	return p.state.Load() == stateAbandoned || p.Ctx.Err() != nil
}

// ReleasedAt is when the request left its bucket (zero if it has not).
func (p *Pending) ReleasedAt() time.Time {
	n := p.released.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Direct returns a Pending for a request that skips the queue (a direct
// route: tokenize, count_tokens, a stored response's retrieval): it is
// dispatched at once, and do performs it in a goroutine that sends its
// events and ends with EventDone or EventError, as the consumer would.
// Cancelling ctx aborts do; the caller cancels ctx and then calls wait,
// which returns once the goroutine has.
func Direct(ctx context.Context, req *Request, do func(context.Context, *Request, Emitter) error) (p *Pending, wait func()) {
	p = newPending(ctx, req, nil)
	p.claim(time.Now())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := do(ctx, req, EmitFunc(p.Send)); err != nil {
			p.Send(Event{Kind: EventError, Err: err})
			return
		}
		p.Send(Event{Kind: EventDone})
	}()
	return p, func() { <-done }
}
