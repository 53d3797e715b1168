package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

var accessEntryKey = &ctxKey{"access log entry"}

// accessEntry is what the handlers add to a request's access log line:
// who asked for which model, how long it waited and what became of it.
// Only the request's own goroutine touches it.
type accessEntry struct {
	tenant    string // "" until authenticated: the fields below are then not logged
	model     string
	outcome   string
	queueWait time.Duration
	ttft      time.Duration
}

// accessEntryFrom returns the request's entry, or a throwaway one outside
// accessLog, so that handlers never check.
func accessEntryFrom(ctx context.Context) *accessEntry {
	if e, ok := ctx.Value(accessEntryKey).(*accessEntry); ok {
		return e
	}
	return &accessEntry{}
}

// accessLog writes one line per request to logger when the request ends,
// whether its handler returns or panics: a panic that passes through
// (http.ErrAbortHandler, or any panic when no recoverer sits inside) is
// logged with panic=true and the status sent, or 500 when none was.
func accessLog(logger *slog.Logger) func(http.Handler) http.Handler {
	if logger == nil {
		panic("gateway: accessLog needs a logger")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w}
			e := &accessEntry{}
			returned := false
			defer func() {
				logger.LogAttrs(r.Context(), slog.LevelInfo, "request", e.attrs(r, sw.status, !returned, time.Since(start))...)
			}()
			next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), accessEntryKey, e)))
			returned = true
		})
	}
}

// attrs are the fields of the line. A handler that returned without
// writing sent 200 (net/http's default); one that panicked before writing
// sent nothing, which the recoverer makes a 500.
func (e *accessEntry) attrs(r *http.Request, status int, panicked bool, took time.Duration) []slog.Attr {
	if status == 0 {
		status = http.StatusOK
		if panicked {
			status = http.StatusInternalServerError
		}
	}
	attrs := []slog.Attr{
		slog.String("request_id", requestIDFrom(r.Context())),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", took),
	}
	if panicked {
		attrs = append(attrs, slog.Bool("panic", true))
	}
	if e.tenant != "" {
		attrs = append(attrs, slog.String("tenant", e.tenant), slog.String("model", e.model),
			slog.Duration("queue_wait", e.queueWait), slog.Duration("ttft", e.ttft), slog.String("outcome", e.outcome))
	}
	return attrs
}
