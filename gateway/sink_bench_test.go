package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

// BenchmarkStreamedRequest is one streamed chat request of 64 chunks
// (op = request) through the whole server: admission, the embedded
// queue, the consumer, the sink and the SSE writer, against a scripted
// upstream. Its -memprofile shows what a request allocates outside the
// relay, which allocates nothing per chunk.
func BenchmarkStreamedRequest(b *testing.B) {
	script := []consume.Event{header}
	for range 64 {
		script = append(script, chunk(`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`))
	}
	r := newRig(b, 0, append(script, consume.Event{Kind: consume.EventDone})...)
	defer r.close()
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(streamReq))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer k")
		w := &countingWriter{h: http.Header{}}
		r.s.ServeHTTP(w, req.WithContext(context.Background()))
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

// countingWriter is a ResponseWriter that keeps nothing of the body: a
// recorder's growing buffer would allocate per chunk on its own.
type countingWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *countingWriter) Header() http.Header { return w.h }
func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
func (w *countingWriter) Flush() {}
