package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"
)

type ctxKey int

const logInfoKey ctxKey = iota

// logInfo collects what the access log line reports. Handlers fill it in;
// only the request's own goroutine touches it.
type logInfo struct {
	id        string
	tenant    string
	model     string
	status    int
	outcome   string
	queueWait time.Duration
	ttft      time.Duration
}

func infoFrom(ctx context.Context) *logInfo {
	if li, ok := ctx.Value(logInfoKey).(*logInfo); ok {
		return li
	}
	return &logInfo{}
}

// requestID gives every request a fresh id, in the context and in the
// response headers of the path's dialect (X-Request-Id; request-id too on
// Anthropic paths). A client-sent id is not trusted: it would let one
// tenant collide with another's registry entry.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		li := &logInfo{id: s.cfg.NewID()}
		dialectOf(r.URL.Path).setRequestID(w.Header(), li.id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), logInfoKey, li)))
	})
}

// recoverer turns a panic into a 500 in the path's dialect (when nothing
// was sent yet) and a log line; http.ErrAbortHandler is re-panicked so net/http
// aborts the connection as intended.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.cfg.Logger.Error("panic serving request", "request_id", infoFrom(r.Context()).id, "panic", v, "stack", string(debug.Stack()))
			if sw.status == 0 {
				dialectOf(r.URL.Path).writeError(sw, &APIError{Status: http.StatusInternalServerError, Message: "Internal error.", Type: "server_error"})
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// accessLog writes one line per request.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw, ok := w.(*statusWriter)
		if !ok {
			sw = &statusWriter{ResponseWriter: w}
		}
		next.ServeHTTP(sw, r)
		li := infoFrom(r.Context())
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		attrs := []slog.Attr{
			slog.String("request_id", li.id),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)),
		}
		if li.tenant != "" {
			attrs = append(attrs, slog.String("tenant", li.tenant), slog.String("model", li.model),
				slog.Duration("queue_wait", li.queueWait), slog.Duration("ttft", li.ttft), slog.String("outcome", li.outcome))
		}
		s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	})
}

// statusWriter remembers the status code. Unwrap keeps flushes and
// http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
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
