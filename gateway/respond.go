package gateway

import (
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/sse"
)

// respond waits for the request's response, written through its sink,
// and returns its outcome. Upstream SSE events go through unchanged, one
// flush each, and a JSON answer as one body, both written by the
// consumer's invocation goroutine (see responseSink); this goroutine
// keeps a stream's connection alive with ": queued" comments while the
// request waits in its bucket (a JSON answer has nothing to send while it
// waits), forwards a direct route's events, and ends the response on the
// band's max_wait, the timeout, the client's departure or the cut.
func (s *Server) respond(r *http.Request, x *exchange, sink *responseSink) string {
	var heartbeat *time.Ticker
	var beats <-chan time.Time
	if !sink.json {
		heartbeat = time.NewTicker(s.cfg.Heartbeat)
		defer heartbeat.Stop()
		beats = heartbeat.C
	}
	bandWait, stop := s.bandTimer(x)
	defer stop()
	for {
		select {
		case <-sink.done:
			return sink.outcome
		case <-bandWait:
			sink.run(func(w http.ResponseWriter, sw *sse.Writer) (string, bool) {
				if e := s.leaveBand(x); e != nil {
					s.streamError(w, sw, x, e)
					return OutcomeRejected, true
				}
				return "", false
			})
		case ev := <-x.pending.Events(): // a direct route's; a queued one's go to the sink
			_ = sink.Deliver(ev)
		case <-beats:
			if x.pending.Dispatched() { // from here only the upstream writes
				heartbeat.Stop()
				beats = nil
				continue
			}
			sink.run(func(_ http.ResponseWriter, sw *sse.Writer) (string, bool) {
				if err := s.queuedComment(sw, x); err != nil {
					return OutcomeClientGone, true
				}
				return "", false
			})
		case <-x.ctx.Done(): // the client left, the timeout passed, or the cut
			e, outcome := s.ended(r, x)
			return s.endStream(sink, x, e, outcome)
		}
	}
}

// ended says why x's context ended, with the error to answer: the
// shutdown's cut (its context ends every request's), the client leaving
// (nil: nobody to answer), or the overall timeout.
func (s *Server) ended(r *http.Request, x *exchange) (*APIError, string) {
	switch {
	case s.cut.Err() != nil:
		return errShutdown(), OutcomeUnavailable
	case r.Context().Err() != nil:
		return nil, OutcomeClientGone
	}
	return errTimeout(fmt.Sprintf("The request did not complete within %s.", s.cfg.RequestTimeout)), OutcomeTimeout
}

// endStream ends a response that is not over yet with outcome, after
// writing e when there is one. A stream whose [DONE] went out with its
// last chunk is whole for its client, who may close its connection then,
// before the body's end: while the call drains its upstream, such a
// stream ends OK, with nothing written after its [DONE].
func (s *Server) endStream(sink *responseSink, x *exchange, e *APIError, outcome string) string {
	sink.run(func(w http.ResponseWriter, sw *sse.Writer) (string, bool) {
		switch {
		case x.wroteDone:
			return OutcomeOK, true
		case e != nil:
			s.streamError(w, sw, x, e)
		}
		return outcome, true
	})
	return sink.finish(outcome)
}

// streamEvent writes one consumer event; done reports the end of the
// response. Named events (Responses, Messages) keep their names.
func (s *Server) streamEvent(w http.ResponseWriter, sw *sse.Writer, x *exchange, ev *consume.Event) (outcome string, done bool) {
	switch ev.Kind {
	case consume.EventHeader:
		s.markFirstByte(x, ev.At)
		x.upstream = ev.Upstream
		if !sw.HeaderWritten() && !isEventStream(ev.Header) {
			// A JSON answer to a streamed request (a retrieval of a
			// finished response): sent as it is, below.
			x.header = ev.Header
			return "", false
		}
		sw.WriteHeader(http.StatusOK)
	case consume.EventBody:
		x.tally.Observe(ev)
		if !sw.HeaderWritten() {
			copyContentType(w.Header(), x.header)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(ev.Data)
			x.wroteBody = true
			return "", false
		}
		if err := sw.Data(ev.Data); err != nil {
			return OutcomeClientGone, true
		}
	case consume.EventChunk:
		if ev.Name != "" { // a stream's id comes in a named event (response.created)
			s.learnID(x, ev.Name, ev.Data)
		}
		if err := s.relayChunk(sw, x, ev); err != nil {
			return OutcomeClientGone, true
		}
	case consume.EventError:
		if x.wroteDone { // whole for the client: nothing follows [DONE] (see endStream)
			return OutcomeOK, true
		}
		e := s.upstreamErr(x, ev.Err)
		s.streamError(w, sw, x, e)
		return outcomeOfUpstream(e), true
	case consume.EventDone:
		if x.wroteBody {
			return OutcomeOK, true
		}
		sw.WriteHeader(http.StatusOK)
		if !x.rt.shape.Named() && !x.wroteDone {
			// The response ends now: [DONE] goes out with the body's end.
			_ = sw.DoneHeld()
		}
		return OutcomeOK, true
	}
	return "", false
}

// jsonEvent writes one consumer event of a non-streamed request: the
// client sees one JSON body or one error; done reports the end of the
// response and its outcome.
func (s *Server) jsonEvent(w http.ResponseWriter, x *exchange, ev *consume.Event) (outcome string, done bool) {
	switch ev.Kind {
	case consume.EventHeader:
		x.status, x.header, x.upstream = ev.Status, ev.Header, ev.Upstream
		s.markFirstByte(x, ev.At)
	case consume.EventBody:
		x.tally.Observe(ev)
		s.learnID(x, "", ev.Data)
		if !x.wroteBody {
			copyContentType(w.Header(), x.header)
			w.WriteHeader(x.status)
		}
		_, _ = w.Write(ev.Data)
		x.wroteBody = true
	case consume.EventError:
		e := s.upstreamErr(x, ev.Err)
		s.streamError(w, nil, x, e)
		return outcomeOfUpstream(e), true
	case consume.EventDone:
		if !x.wroteBody { // never answer 200 with nothing
			x.rt.dialect.writeError(w, errUpstream("The model server sent no response body."))
			return OutcomeUpstreamError, true
		}
		return OutcomeOK, true
	}
	return "", false
}

// relayChunk writes a chunk the client gets, or drops one it does not
// (see forwardChunk). What the relay says follows at once goes out in
// the same write: an event held for its successor is flushed by the
// next one written, or here when that one is dropped; an OpenAI stream's
// [DONE] is written with its last chunk (not again at the end). The
// stream's last event, when the upstream's body ended with it (Final),
// is left for the response's end to send with the body's end (see
// sse.Writer.DoneHeld): the call has nothing left to wait for, and
// the handler returns at once.
func (s *Server) relayChunk(sw *sse.Writer, x *exchange, ev *consume.Event) error {
	if s.forwardChunk(x, ev) {
		if err := writeChunk(sw, ev); err != nil {
			return err
		}
	}
	switch {
	case ev.Ends:
		x.wroteDone = true
		if ev.Final {
			return sw.DoneHeld()
		}
		return sw.Done()
	case !ev.More && !ev.Final:
		return sw.Flush()
	}
	return nil
}

// writeChunk writes a chunk in the frame it came in when it can (one
// write of the upstream's bytes), held for what follows at once, else
// frames it anew.
func writeChunk(sw *sse.Writer, ev *consume.Event) error {
	switch {
	case ev.Frame != nil && (ev.More || ev.Ends || ev.Final):
		return sw.FrameHeld(ev.Frame)
	case ev.Frame != nil:
		return sw.Frame(ev.Frame)
	}
	if ev.Name != "" {
		return sw.Event(ev.Name, ev.Data)
	}
	return sw.Data(ev.Data)
}

// forwardChunk records usage and decides whether the client gets the
// chunk: the usage-only chunk the gateway asked for is dropped unless the
// client asked for it too.
func (s *Server) forwardChunk(x *exchange, ev *consume.Event) bool {
	_, reported := x.tally.Observe(ev)
	return !reported || x.rt.shape != consume.ShapeOpenAI || !x.tally.Usage.Only || x.req.WantsUsage
}

// streamError ends a stream with an error: as a JSON response while
// nothing was sent yet, as the dialect's error event after that.
func (s *Server) streamError(w http.ResponseWriter, sw *sse.Writer, x *exchange, e *APIError) {
	switch {
	case x.wroteBody: // a whole JSON answer went out: nothing can follow it
	case sw == nil || !sw.HeaderWritten(): // a JSON request's sink has no SSE writer
		x.rt.dialect.writeError(w, e)
	default:
		_ = x.rt.dialect.streamError(sw, x.rt.shape.Named(), e)
	}
}

// queuedComment tells a waiting client where it stands.
func (s *Server) queuedComment(sw *sse.Writer, x *exchange) error {
	if x.pending.Dispatched() {
		return nil
	}
	if !sw.HeaderWritten() {
		sw.WriteHeader(http.StatusOK)
	}
	pos := s.cfg.Queue.Position(x.pending)
	eta := time.Duration(0)
	if rate := s.cfg.Pacer.EffectiveRate(x.key); rate > 0 && pos > 1 {
		eta = time.Duration(float64(pos-1) / rate * float64(time.Second))
	}
	return sw.Comment(fmt.Sprintf("queued position=%d eta_ms=%d", pos, eta.Milliseconds()))
}

// bandTimer fires when x has waited its band's max_wait; the channel is
// nil (never fires) when the band has no bound.
func (s *Server) bandTimer(x *exchange) (<-chan time.Time, func()) {
	d := s.bandMaxWait(x)
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(max(d-time.Since(x.admitted), 0))
	return t.C, func() { t.Stop() }
}

// leaveBand withdraws x when its band's max_wait has passed and it is
// still queued, and returns the 429 to answer; nil when the pool took it
// meanwhile (its response then comes as usual).
func (s *Server) leaveBand(x *exchange) *APIError {
	if !x.pending.Abandon() {
		return nil
	}
	e := bandWaitError(x, s.bandMaxWait(x))
	s.cfg.Observer.Rejected(x.key.Tenant, x.key.Model, e.Reason)
	return e
}

func (s *Server) markFirstByte(x *exchange, at time.Time) {
	if !x.firstByte.IsZero() {
		return
	}
	x.firstByte = at
	released := x.pending.ReleasedAt()
	if !released.IsZero() {
		x.log.queueWait = released.Sub(x.admitted)
		s.cfg.Observer.QueueWait(x.key.Tenant, x.key.Model, x.log.queueWait)
	}
	x.log.ttft = at.Sub(x.admitted)
	s.cfg.Observer.TTFT(x.key.Tenant, x.key.Model, x.log.ttft)
}

func outcomeOfUpstream(e *APIError) string {
	if e.Status == http.StatusGatewayTimeout {
		return OutcomeTimeout
	}
	return OutcomeUpstreamError
}

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

func copyContentType(dst, src http.Header) {
	if ct := src.Get("Content-Type"); ct != "" {
		dst.Set("Content-Type", ct)
		return
	}
	dst.Set("Content-Type", "application/json")
}
