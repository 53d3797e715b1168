package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkAccessLog is a served request's access log line, written by
// the JSON handler the process logs with (to io.Discard: the batching
// writer's cost is not the line's).
func BenchmarkAccessLog(b *testing.B) {
	mw := accessLog(slog.New(slog.NewJSONHandler(io.Discard, nil)))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := accessEntryFrom(r.Context())
		e.tenant, e.model, e.outcome = "acme", "llama-3.1-8b", "ok"
		e.queueWait, e.ttft = 2*time.Millisecond, 50*time.Millisecond
	}))
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}
