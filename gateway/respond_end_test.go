package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// How a request ends when the response does not: the overall timeout,
// the client leaving, a shutdown's cut, a band's max_wait. Each test pins
// the exact bytes the client gets.

func TestTimeoutBeforeTheFirstByteIs504(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2*time.Second, header, consume.Event{Kind: consume.EventDone})
		r.up.block = make(chan struct{}) // the model never answers
		w := r.do(context.Background(), jsonReq)
		want := `{"error":{"message":"The request did not complete within 2s.","type":"timeout","param":null,"code":"timeout"}}`
		if w.Code != http.StatusGatewayTimeout || w.Body.String() != want {
			t.Fatalf("got %d %s\nwant 504 %s", w.Code, w.Body, want)
		}
		r.close()
	})
}

func TestTimeoutMidStreamIsAnErrorEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2*time.Second, header, chunk(`{"a":1}`), consume.Event{Kind: consume.EventDone})
		r.up.hang = true
		r.up.ended = make(chan error, 1)
		w := r.do(context.Background(), streamReq)
		want := "data: {\"a\":1}\n\n" +
			"data: {\"error\":{\"message\":\"The request did not complete within 2s.\",\"type\":\"timeout\",\"param\":null,\"code\":\"timeout\"}}\n\n"
		if w.Code != http.StatusOK || w.Body.String() != want {
			t.Fatalf("got %d %q\nwant 200 %q", w.Code, w.Body, want)
		}
		if err := <-r.up.ended; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("upstream call ended with %v, want it aborted by the deadline", err)
		}
		r.close()
	})
}

// A client that leaves mid-stream aborts the upstream call, and nothing
// more is written.
func TestClientGoneAbortsTheUpstreamCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0, header, chunk(`{"a":1}`), consume.Event{Kind: consume.EventDone})
		r.up.hang = true
		r.up.ended = make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan string)
		go func() { done <- r.do(ctx, streamReq).Body.String() }()
		synctest.Wait() // the chunk is out; the model hangs
		cancel()
		if got := <-done; got != "data: {\"a\":1}\n\n" {
			t.Fatalf("body %q, want the one chunk and nothing after", got)
		}
		if err := <-r.up.ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("upstream call ended with %v, want it cancelled", err)
		}
		r.close()
	})
}

// A client that stops taking the stream (its write fails) aborts the
// upstream call at that chunk: the chunks after it are never read, and
// nothing more is written.
func TestFailedWriteAbortsTheUpstreamCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0, header, chunk(`{"a":1}`), chunk(`{"a":2}`), consume.Event{Kind: consume.EventDone})
		r.up.ended = make(chan error, 1)
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(streamReq))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer k")
		w := &brokenWriter{h: http.Header{}}
		r.s.ServeHTTP(w, req)
		if err := <-r.up.ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("upstream call ended with %v, want it cancelled", err)
		}
		if w.code != http.StatusOK || len(w.writes) != 1 || w.writes[0] != "data: {\"a\":1}\n\n" {
			t.Fatalf("got %d, writes %q; want 200 and the first chunk's write only", w.code, w.writes)
		}
		r.close()
	})
}

// brokenWriter is a client connection that fails every write.
type brokenWriter struct {
	h      http.Header
	code   int
	writes []string
}

func (w *brokenWriter) Header() http.Header { return w.h }
func (w *brokenWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *brokenWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return 0, errors.New("connection reset by peer")
}
func (w *brokenWriter) Flush() {}

// The end of a shutdown's grace period cuts a running stream with an
// explicit error event.
func TestCutEndsAStreamWithAnErrorEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0, header, chunk(`{"a":1}`), consume.Event{Kind: consume.EventDone})
		r.up.hang = true
		done := make(chan string)
		go func() { done <- r.do(context.Background(), streamReq).Body.String() }()
		synctest.Wait()
		r.s.Cut()
		want := "data: {\"a\":1}\n\n" +
			"data: {\"error\":{\"message\":\"pacegate is shutting down and could not finish this request within its grace period.\",\"type\":\"server_error\",\"param\":null,\"code\":\"server_shutdown\"}}\n\n"
		if got := <-done; got != want {
			t.Fatalf("body %q\nwant %q", got, want)
		}
		r.close()
	})
}

// A request of a band with a max_wait that the saturated pool does not
// take in time gets a 429 queue_full, and is never sent later.
func TestBandMaxWaitTurnsTheWaitInto429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0, header, consume.Event{Kind: consume.EventDone})
		r.up.full = true
		r.s.cfg.BandMaxWait = func(p policy.Priority) time.Duration {
			if p == policy.PriorityNormal {
				return 3 * time.Second
			}
			return 0
		}
		w := r.do(context.Background(), jsonReq)
		want := `{"error":{"message":"Request queue full for m in tenant a: the normal-priority band's max_wait of 3s passed before the pool could take it.","type":"requests","param":null,"code":"queue_full"}}`
		if w.Code != http.StatusTooManyRequests || w.Body.String() != want || w.Header().Get("Retry-After") != "3" {
			t.Fatalf("got %d %s (Retry-After %q)\nwant 429 %s", w.Code, w.Body, w.Header().Get("Retry-After"), want)
		}
		r.close()
	})
}
