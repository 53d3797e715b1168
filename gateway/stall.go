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
// disables it (guardWrites returns w itself).
//
// It is not safe for concurrent use: the handler's goroutine alone
// writes the response. Unwrap and
// FlushError keep http.ResponseController working through it.
type stallWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	d       time.Duration
	slack   time.Duration // how stale the deadline may get before it moves
	armedAt time.Time     // when the deadline was last moved; zero: never
}

// guardWrites wraps w with a stallWriter of d; call release when the
// response is over.
func guardWrites(w http.ResponseWriter, d time.Duration) (_ http.ResponseWriter, release func()) {
	if d <= 0 {
		return w, func() {}
	}
	sw := &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d, slack: min(d/32, 100*time.Millisecond)}
	return sw, sw.release
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
// without deadlines (ErrNotSupported) is left unbounded.
func (w *stallWriter) arm() {
	now := time.Now()
	if !w.armedAt.IsZero() && now.Sub(w.armedAt) < w.slack {
		return
	}
	if w.rc.SetWriteDeadline(now.Add(w.d)) == nil {
		w.armedAt = now
	}
}

func (w *stallWriter) release() {
	if !w.armedAt.IsZero() {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}
