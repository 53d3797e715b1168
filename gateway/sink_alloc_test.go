//go:build !race

package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

// A streamed chunk allocates nothing on its way from the upstream's emit
// through the consumer, the stream's sink and the SSE writer to the
// client: a stream of 1,100 chunks allocates what one of 100 does
// (per-request setup only). The race detector allocates on its own,
// hence the build tag.
func TestStreamedChunkAllocatesNothing(t *testing.T) {
	allocs := func(n int) float64 {
		script := []consume.Event{header}
		for range n {
			script = append(script, chunk(`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`))
		}
		r := newRig(t, 0, append(script, consume.Event{Kind: consume.EventDone})...)
		defer r.close()
		stream := func() {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(streamReq))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer k")
			w := &countingWriter{h: http.Header{}}
			r.s.ServeHTTP(w, req.WithContext(context.Background()))
			if w.code != http.StatusOK || w.n == 0 {
				t.Fatalf("status %d, %d bytes", w.code, w.n)
			}
		}
		stream() // warm: pools and buffers reach their size
		return testing.AllocsPerRun(5, stream)
	}
	short, long := allocs(100), allocs(1100)
	if perChunk := (long - short) / 1000; perChunk > 0.01 {
		t.Fatalf("%.0f allocations for 100 chunks, %.0f for 1,100: %.3f per chunk, want 0", short, long, perChunk)
	}
	t.Logf("%.0f allocations per request of 100 chunks, %.0f of 1,100", short, long)
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
