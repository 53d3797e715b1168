package gateway

import (
	"log/slog"
	"net/http"
	"runtime/debug"
)

// errInternal is what a client gets for a panic.
func errInternal() *APIError {
	return &APIError{Status: http.StatusInternalServerError, Message: "Internal error.", Type: "server_error"}
}

// recoverer turns a panic into a log line (with the request id and the
// stack) and, when nothing was sent yet, a 500 written by writeError, so
// that the error comes in the shape the path's clients parse.
// http.ErrAbortHandler is re-panicked: it asks net/http to abort the
// connection (a stream cut after its headers), which it then does.
func recoverer(logger *slog.Logger, writeError func(http.ResponseWriter, *http.Request, *APIError)) func(http.Handler) http.Handler {
	if logger == nil || writeError == nil {
		panic("gateway: recoverer needs a logger and an error writer")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := statusOf(w)
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger.Error("panic serving request", "request_id", requestIDFrom(r.Context()), "panic", v,
					"stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, r, errInternal())
				}
			}()
			next.ServeHTTP(sw, r)
		})
	}
}
