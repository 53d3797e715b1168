package vllmsim

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
)

// generate serves /v1/chat/completions (chat) or /v1/completions.
func (s *Server) generate(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		j, e := s.parse(r, chat)
		if e != nil {
			e.write(w)
			return
		}
		j.out = chatOut{j}
		s.run(w, r, j)
	}
}

// run answers a validated job with the shared timing, slots, failures
// and faults, rendered by j.out.
func (s *Server) run(w http.ResponseWriter, r *http.Request, j *job) {
	flt, f, ok := s.admit(w, r, j)
	if !ok {
		return
	}
	if j.stream {
		s.stream(w, r.Context(), j, f.ResetAfterChunks, flt)
	} else {
		s.complete(w, r.Context(), j, flt)
	}
}

// admit counts a validated job and applies what must happen before its
// response starts: an injected status (answered here), a reset, slow
// headers. It returns the job's fault and failure, and false when the
// request was answered or abandoned.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, j *job) (Fault, Failure, bool) {
	s.requests.Add(1)
	if !j.instant {
		s.promptTokens.Add(int64(j.promptTokens))
	}
	flt, e := s.takeFault(r, j.body)
	if e != nil {
		j.out.writeError(w, e)
		return flt, Failure{}, false
	}
	f := s.takeFailure(r)
	switch {
	case flt.Status > 0 || f.StatusBeforeFirstByte > 0:
		s.failed.Add(1)
		j.out.writeError(w, statusError(max(flt.Status, f.StatusBeforeFirstByte)))
		return flt, f, false
	case f.ResetBeforeFirstByte, f.ResetAfterChunks > 0 && !j.stream:
		s.failed.Add(1)
		resetConn(w)
	}
	if flt != (Fault{}) {
		s.failed.Add(1)
	}
	if flt.SlowHeaders > 0 && sleepUntil(r.Context(), time.Now().Add(flt.SlowHeaders)) != nil {
		s.abort(j.id, true)
		return flt, f, false
	}
	w.Header().Set("X-Request-Id", j.id)
	return flt, f, true
}

// stream sends a streamed response; resetAfter > 0 cuts the connection
// after that many data events, and flt may make it misbehave.
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, j *job, resetAfter int, flt Fault) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	out := &eventWriter{w: w, rc: http.NewResponseController(w), resetAfter: resetAfter, s: s, ctx: ctx, fault: flt}
	if out.flush() != nil {
		s.abort(j.id, true)
		return
	}
	q, queued, err := s.begin(ctx, j)
	if err != nil {
		s.abort(j.id, queued)
		return
	}
	defer q.end()
	for i := range j.maxTokens {
		if q.wait(ctx) != nil {
			s.abort(j.id, false)
			return
		}
		if i == 0 && out.sendAll(j.out.head()) != nil {
			s.abort(j.id, false)
			return
		}
		if out.sendAll(j.out.token(i)) != nil {
			s.abort(j.id, false)
			return
		}
		s.genTokens.Add(1)
		q.produced()
	}
	if out.sendAll(j.out.tail()) != nil {
		s.abort(j.id, false)
		return
	}
	s.finished(j)
}

// finished counts a response generated in full and tells its renderer.
func (s *Server) finished(j *job) {
	s.completed.Add(1)
	if f, ok := j.out.(finisher); ok {
		f.finished()
	}
}

// complete sends a non-streamed response when the last token is due (a
// job without tokens, such as an embedding, after TTFT). An instant job
// takes no slot and no time.
func (s *Server) complete(w http.ResponseWriter, ctx context.Context, j *job, flt Fault) {
	if !j.instant {
		q, queued, err := s.begin(ctx, j)
		if err != nil {
			s.abort(j.id, queued)
			return
		}
		defer q.end()
		if q.waitTokens(ctx, j.maxTokens) != nil {
			s.abort(j.id, false)
			return
		}
	}
	body := j.out.full()
	if flt.Stall {
		<-ctx.Done()
		s.abort(j.id, false)
		return
	}
	if flt.TruncatedJSON {
		body = body[:len(body)/2]
	}
	ct := "application/json"
	if j.contentType != "" {
		ct = j.contentType
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if _, err := w.Write(body); err != nil {
		s.abort(j.id, false)
		return
	}
	s.genTokens.Add(int64(j.maxTokens))
	s.finished(j)
}

var doneData = []byte("[DONE]")

// eventWriter writes frames and flushes each one.
type eventWriter struct {
	w          http.ResponseWriter
	rc         *http.ResponseController
	buf        []byte
	sent       int
	resetAfter int
	s          *Server
	ctx        context.Context // the request's, which a stall waits on
	fault      Fault
}

func (o *eventWriter) sendAll(frames []frame) error {
	for _, f := range frames {
		if err := o.send(f); err != nil {
			return err
		}
	}
	return nil
}

func (o *eventWriter) send(f frame) error {
	if o.resetAfter > 0 && o.sent == o.resetAfter {
		o.s.failed.Add(1)
		resetConn(o.w)
	}
	data, err := o.misbehave(f)
	if err != nil || data == nil {
		return err
	}
	o.buf = o.buf[:0]
	if f.event != "" {
		o.buf = append(append(append(o.buf, "event: "...), f.event...), '\n')
	}
	o.buf = append(append(append(o.buf, "data: "...), data...), "\n\n"...)
	if _, err := o.w.Write(o.buf); err != nil {
		return err
	}
	o.sent++
	return o.flush()
}

func (o *eventWriter) flush() error { return o.rc.Flush() }

// resetConn drops the connection without ending the response: with a
// hijackable connection it closes the socket with SO_LINGER 0 (a TCP
// reset); otherwise it panics with http.ErrAbortHandler, which makes the
// server close the connection (or reset the HTTP/2 stream). Either way
// the client sees a broken response, never a clean end.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
	panic(http.ErrAbortHandler)
}

// misbehave applies o.fault before data event number o.sent: it returns
// the data to send instead (nil: send nothing), or an error that ends the
// response (a stall that the client ended).
func (o *eventWriter) misbehave(fr frame) ([]byte, error) {
	f, data := o.fault, fr.data
	switch {
	case f.Stall && o.sent == f.StallAfter:
		<-o.ctx.Done()
		return nil, o.ctx.Err()
	case f.NoDone && fr.terminal:
		return nil, nil
	case f.GarbageSSE && o.sent == 1:
		if _, err := o.w.Write(garbage); err != nil {
			return nil, err
		}
	case f.TruncatedJSON && o.sent == 1:
		data = data[:len(data)/2]
	}
	return data, nil
}
