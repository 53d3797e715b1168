package gateway

import (
	"net/http"
	"time"
)

// stallWriter bounds every write and flush to the client by a write
// deadline, so that a client that stops reading while keeping its
// connection makes the write fail after d instead of holding the
// response (and its upstream slot) forever. Each write and flush moves
// the deadline to now+d, unless it was moved less than d/32 ago (capped
// at 100 ms): a stream's chunks come faster than that, and moving a
// connection's deadline is a runtime timer update, twice per chunk. A
// blocked write thus fails between d−slack and d after it began. release
// clears the deadline for the connection's next request. A zero d
// disables it (openSink then writes to the client's writer itself).
//
// It is not safe for concurrent use: whoever writes the response (the
// handler, or the upstream call through the response's sink) holds the
// sink's lock. Unwrap and FlushError keep http.ResponseController working
// through it.
type stallWriter struct {
	http.ResponseWriter
	rc      http.ResponseController
	d       time.Duration
	slack   time.Duration // how stale the deadline may get before it moves
	armedAt time.Time     // when the deadline was last moved; zero: never
}

// init makes the zero w a guard of rw for d > 0, in place: the gateway
// keeps it in the response's sink.
func (w *stallWriter) init(rw http.ResponseWriter, d time.Duration) {
	*w = stallWriter{ResponseWriter: rw, rc: *http.NewResponseController(rw), d: d, slack: min(d/32, 100*time.Millisecond)}
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *stallWriter) FlushError() error {
	w.arm()
	return w.rc.Flush()
}

func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// arm moves the deadline when it is staler than the slack; a writer
// without deadlines (ErrNotSupported) is left unbounded. Whether to move
// it is read from the monotonic clock alone: one clock read per write,
// where time.Now takes two, and a chunk is a write and a flush.
func (w *stallWriter) arm() {
	if !w.armedAt.IsZero() && time.Since(w.armedAt) < w.slack {
		return
	}
	now := time.Now()
	if w.rc.SetWriteDeadline(now.Add(w.d)) == nil {
		w.armedAt = now
	}
}

func (w *stallWriter) release() {
	if !w.armedAt.IsZero() {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}
