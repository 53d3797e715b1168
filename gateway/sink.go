package gateway

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/sse"
)

// responseSink writes a response on whichever goroutine has something
// to write. The consumer's invocation goroutine delivers the upstream's
// header, chunks or body, and end straight to the client (for a stream,
// one goroutine per chunk, as a bare proxy has); the handler's goroutine
// writes a stream's heartbeats, the errors of its own clocks (the band's
// max_wait, the request timeout, the shutdown cut) and events a direct
// route sends on the Pending's channel. A non-streamed request has a sink
// too, so that its upstream call can run on the handler's goroutine when
// its delivery is inline (see consume.Sink), instead of a goroutine of
// its own and a channel.
//
// mu makes them take turns, and guards the response writer, over and
// outcome, and the exchange's response fields (tally, upstream,
// firstByte, learned, status, header, wroteBody, the access log's
// timings): the handler reads those only after the sink is over, so
// nothing is written to the client or the exchange once the handler has
// returned.
//
// The sink lives in its exchange, and holds its write guard and SSE
// writer by value: a stream's every chunk touches all of them, and on a
// busy gateway, where thousands of streams take turns, each is cold in
// the cache by the stream's next chunk. One region of memory costs fewer
// misses than the six objects they were (the sink, the guard, the
// writer, its frame buffer and two ResponseControllers; see
// bench/findings/overhead.md). In it, what a chunk touches comes first,
// after the exchange's tally: the sink's lock and writers, then the
// guard's fields and the writer's (each type puts those first); the
// writer's frame room and the end's fields come after.
type responseSink struct {
	mu   sync.Mutex
	over bool
	json bool                // a non-streamed request's: one JSON body or one error
	sw   *sse.Writer         // &stream when the request streams
	w    http.ResponseWriter // the client's writer, through guard when it is armed
	x    *exchange
	s    *Server

	guard  stallWriter
	stream sse.Writer

	outcome string
	done    chan struct{} // closed when over
}

// openSink readies x.sink, the sink of x's response: its SSE stream when
// the request streams, else its JSON answer, both written through the
// stall guard when WriteStallTimeout is set.
func (s *Server) openSink(w http.ResponseWriter, x *exchange) *responseSink {
	k := &x.sink
	k.s, k.x, k.w, k.json, k.done = s, x, w, !x.req.Stream, make(chan struct{})
	if d := s.cfg.WriteStallTimeout; d > 0 {
		k.guard.init(w, d)
		k.w = &k.guard
	}
	if !k.json {
		k.stream.InitSerial(k.w)
		k.sw = &k.stream
	}
	return k
}

// Attach implements consume.Sink: the exchange learns its Pending before
// the invocation goroutine can deliver its first event.
func (k *responseSink) Attach(p *consume.Pending) { k.x.pending = p }

// Deliver implements consume.Sink: it writes ev to the client and ends
// the response at its last event. Once the response is over (ended by
// its last event, a failed write or the handler) it refuses everything
// with a context error, which stops the upstream call like a client
// that left; once its context has ended, it refuses every event but a
// chunk.
//
// A chunk needs no look at the context: it is what the client asked
// for, and the handler's end of the response (the timeout's error
// event, or nothing for a client that left) follows it. Not reading the
// context spares each chunk a miss in the cache (the context is an
// object of its own, cold by the stream's next chunk).
func (k *responseSink) Deliver(ev consume.Event) (err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.recoverWrite(&err)
	if k.over {
		return context.Canceled
	}
	if ev.Kind != consume.EventChunk {
		if err := k.x.ctx.Err(); err != nil {
			// The client left or the timeout passed: the handler ends
			// the response as it would have, not with what the aborted
			// call says.
			return err
		}
	}
	outcome, done := k.event(&ev)
	if !done {
		return nil
	}
	k.end(outcome)
	if outcome == OutcomeClientGone {
		return context.Canceled
	}
	return nil
}

// event writes ev in the response's form; mu is held.
// ev is a pointer: an Event is 200 bytes, copied at each call otherwise.
func (k *responseSink) event(ev *consume.Event) (outcome string, done bool) {
	if k.json {
		return k.s.jsonEvent(k.w, k.x, ev)
	}
	return k.s.streamEvent(k.w, k.sw, k.x, ev)
}

// recoverWrite answers a panic of the gateway's own code while it writes
// an event (a bug, on the goroutine of the upstream call, which the
// handler's recoverer does not cover): it is logged with its stack, the
// client gets the recoverer's 500 while nothing was sent (an error event
// once the stream has begun), and the call is stopped as for a client
// that left. mu is held.
func (k *responseSink) recoverWrite(err *error) {
	v := recover()
	if v == nil {
		return
	}
	k.s.cfg.Logger.Error("panic writing a response", "request_id", k.x.id, "panic", v, "stack", string(debug.Stack()))
	if !k.over {
		k.tryWrite(errInternal())
		k.end(OutcomeInternalError)
	}
	*err = context.Canceled
}

// tryWrite writes e as the response's end, unless that panics too (the
// writer itself may be what failed): the response then ends without it.
func (k *responseSink) tryWrite(e *APIError) {
	defer func() { _ = recover() }()
	k.s.streamError(k.w, k.sw, k.x, e)
}

// run lets the handler write: f writes what it must and says whether that
// ended the response, and with which outcome. It does nothing once the
// response is over.
func (k *responseSink) run(f func(w http.ResponseWriter, sw *sse.Writer) (outcome string, done bool)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.over {
		return
	}
	if outcome, done := f(k.w, k.sw); done {
		k.end(outcome)
	}
}

// finish ends the response with outcome unless it is over already, and
// returns the outcome it ended with. After it, nothing more is written.
func (k *responseSink) finish(outcome string) string {
	k.run(func(http.ResponseWriter, *sse.Writer) (string, bool) { return outcome, true })
	<-k.done
	return k.outcome
}

// end marks the response over; mu is held.
func (k *responseSink) end(outcome string) {
	k.over, k.outcome = true, outcome
	close(k.done)
}
