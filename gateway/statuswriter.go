package gateway

import "net/http"

// statusWriter remembers the status code sent. Each middleware that needs
// the status wraps the writer it is given in its own. Unwrap keeps
// flushes and http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until the header is written
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
