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
// at a second): a stream's chunks come faster than that, and moving a
// connection's deadline is a runtime timer update (about 1 % of a
// stream's CPU in user space when it moved every 100 ms). A
// blocked write thus fails between d−slack and d after it began. The
// deadline stays when the handler returns: net/http's own last write of
// the response (the body's end, and a stream's last event when it was
// left for it, see sse.Writer.DoneHeld) is bounded by it too, and
// net/http clears it after that write, for the connection's next
// request. A zero d disables it (openSink then writes to the client's
// writer itself).
//
// It is not safe for concurrent use: whoever writes the response (the
// handler, or the upstream call through the response's sink) holds the
// sink's lock. Unwrap and FlushError keep http.ResponseController working
// through it.
type stallWriter struct {
	// body is where writes and flushes go: the writer given until the
	// header is out, then the one beneath the status recorders it wraps
	// (see WriteHeader); flush is body's FlushError, when it has one.
	// They come first, with what arm reads: a chunk touches only these.
	body    http.ResponseWriter
	flush   interface{ FlushError() error }
	armedAt time.Time     // when the deadline was last moved; zero: never
	slack   time.Duration // how stale the deadline may get before it moves

	http.ResponseWriter // the writer given: the header goes through it
	rc                  http.ResponseController
	d                   time.Duration
}

// init makes the zero w a guard of rw for d > 0, in place: the gateway
// keeps it in the response's sink.
func (w *stallWriter) init(rw http.ResponseWriter, d time.Duration) {
	*w = stallWriter{ResponseWriter: rw, rc: *http.NewResponseController(rw), d: d, slack: min(d/32, time.Second)}
	w.writeTo(rw)
}

// WriteHeader sends the header through the writer given, whose status
// recorders (the access log's, the recoverer's) note the status; after
// it they have nothing more to note, and the body's every chunk goes
// to the writer beneath them, one call and one object fewer each.
func (w *stallWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	w.writeTo(beneathStatus(w.ResponseWriter))
}

// writeTo makes rw the writer that writes and flushes go to.
func (w *stallWriter) writeTo(rw http.ResponseWriter) {
	w.body = rw
	w.flush, _ = rw.(interface{ FlushError() error })
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.body.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *stallWriter) FlushError() error {
	w.arm()
	if w.flush != nil {
		return w.flush.FlushError()
	}
	return http.NewResponseController(w.body).Flush()
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
