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
			defer func() { e.log(logger, r, sw.status, !returned, time.Since(start)) }()
			next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), accessEntryKey, e)))
			returned = true
		})
	}
}

// log writes the line, a record handed to the logger's handler as it is:
// Logger.LogAttrs would also look up its caller's program counter
// (runtime.Callers), which the handler does not print, and copy the
// fields once more; together a quarter of the line's cost.
func (e *accessEntry) log(logger *slog.Logger, r *http.Request, status int, panicked bool, took time.Duration) {
	h, ctx := logger.Handler(), r.Context()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	e.addTo(&rec, r, status, panicked, took)
	_ = h.Handle(ctx, rec)
}

// addTo adds the line's fields to rec. A handler that returned without
// writing sent 200 (net/http's default); one that panicked before writing
// sent nothing, which the recoverer makes a 500.
func (e *accessEntry) addTo(rec *slog.Record, r *http.Request, status int, panicked bool, took time.Duration) {
	if status == 0 {
		status = http.StatusOK
		if panicked {
			status = http.StatusInternalServerError
		}
	}
	rec.AddAttrs(
		slog.String("request_id", requestIDFrom(r.Context())),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", took),
	)
	if panicked {
		rec.AddAttrs(slog.Bool("panic", true))
	}
	if e.tenant != "" {
		rec.AddAttrs(slog.String("tenant", e.tenant), slog.String("model", e.model),
			slog.Duration("queue_wait", e.queueWait), slog.Duration("ttft", e.ttft), slog.String("outcome", e.outcome))
	}
}
