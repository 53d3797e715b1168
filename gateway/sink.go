package gateway

import (
	"context"
	"net/http"
	"sync"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/sse"
)

// streamSink writes a streamed response on whichever goroutine has
// something to write. The consumer's invocation goroutine delivers the
// upstream's header, chunks and end straight to the client (one goroutine
// per chunk, as a bare proxy has); the handler's goroutine writes the
// heartbeats and the errors of its own clocks (the band's max_wait, the
// request timeout, the shutdown cut) and events a direct route sends on
// the Pending's channel.
//
// mu makes them take turns, and guards the response writer, over and
// outcome, and the exchange's response fields (tally, upstream,
// firstByte, learned, header, wroteBody, the access log's timings): the
// handler reads those only after the sink is over, so nothing is written
// to the client or the exchange once the handler has returned.
type streamSink struct {
	s  *Server
	x  *exchange
	w  http.ResponseWriter
	sw *sse.Writer

	mu      sync.Mutex
	over    bool
	outcome string
	done    chan struct{} // closed when over
}

func (s *Server) newStreamSink(w http.ResponseWriter, x *exchange) *streamSink {
	return &streamSink{s: s, x: x, w: w, sw: sse.NewSerialWriter(w), done: make(chan struct{})}
}

// Attach implements consume.Sink: the exchange learns its Pending before
// the invocation goroutine can deliver its first event.
func (k *streamSink) Attach(p *consume.Pending) { k.x.pending = p }

// Deliver implements consume.Sink: it writes ev to the client and ends
// the response at its last event. Once the response is over (ended by
// its last event, a failed write or the handler) or its context has
// ended, it refuses everything with a context error, which stops the
// upstream call like a client that left.
func (k *streamSink) Deliver(ev consume.Event) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.over {
		return context.Canceled
	}
	if err := k.x.ctx.Err(); err != nil {
		// The client left or the timeout passed: the handler ends the
		// response as it would have, not with what the aborted call says.
		return err
	}
	outcome, done := k.s.streamEvent(k.w, k.sw, k.x, ev)
	if !done {
		return nil
	}
	k.end(outcome)
	if outcome == OutcomeClientGone {
		return context.Canceled
	}
	return nil
}

// run lets the handler write: f writes what it must and says whether that
// ended the response, and with which outcome. It does nothing once the
// response is over.
func (k *streamSink) run(f func(w http.ResponseWriter, sw *sse.Writer) (outcome string, done bool)) {
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
func (k *streamSink) finish(outcome string) string {
	k.run(func(http.ResponseWriter, *sse.Writer) (string, bool) { return outcome, true })
	<-k.done
	return k.outcome
}

// end marks the response over; mu is held.
func (k *streamSink) end(outcome string) {
	k.over, k.outcome = true, outcome
	close(k.done)
}
