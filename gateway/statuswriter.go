package gateway

import "net/http"

// statusWriter remembers the status code sent. The first middleware that
// needs the status wraps the writer it is given; the ones inside it read
// the same statusWriter (see statusOf). Unwrap keeps flushes and
// http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until the header is written
}

// statusOf is w when w is a statusWriter already, else a new one around
// w: every layer a writer adds is one more call and one more object to
// touch on each write of a stream's every chunk.
func statusOf(w http.ResponseWriter) *statusWriter {
	if sw, ok := w.(*statusWriter); ok {
		return sw
	}
	return &statusWriter{ResponseWriter: w}
}

// beneathStatus is w without the statusWriters around it.
func beneathStatus(w http.ResponseWriter) http.ResponseWriter {
	for {
		sw, ok := w.(*statusWriter)
		if !ok {
			return w
		}
		w = sw.ResponseWriter
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets code that type-asserts http.Flusher still flush.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController calls first: it reaches the
// connection's FlushError directly (the SSE writer flushes every chunk
// through it) and hands its error back, so that a vanished client is seen
// at the flush instead of being dropped as Flush must.
func (w *statusWriter) FlushError() error {
	if f, ok := w.ResponseWriter.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}
