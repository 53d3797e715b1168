package gateway

import (
	"net/http"
	"time"
)

// stallWriter bounds every write and flush to the client by a write
// deadline, so that a client that stops reading while keeping its
// connection makes the write fail after d instead of holding the
// response (and its upstream slot) forever. Each write and flush moves
// the deadline to now+d; release clears it for the connection's next
// request. A zero d disables it (guardWrites returns w itself).
//
// It is not safe for concurrent use: the handler's goroutine alone
// writes the response. Unwrap and
// FlushError keep http.ResponseController working through it.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	armed bool
}

// guardWrites wraps w with a stallWriter of d; call release when the
// response is over.
func guardWrites(w http.ResponseWriter, d time.Duration) (_ http.ResponseWriter, release func()) {
	if d <= 0 {
		return w, func() {}
	}
	sw := &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
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

// arm moves the deadline; a writer without deadlines (ErrNotSupported)
// is left unbounded.
func (w *stallWriter) arm() {
	if w.rc.SetWriteDeadline(time.Now().Add(w.d)) == nil {
		w.armed = true
	}
}

func (w *stallWriter) release() {
	if w.armed {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}
