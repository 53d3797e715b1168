package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// deadlineRecorder is a ResponseWriter that records the write deadlines
// set on it, as http.ResponseController sets them.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	log []string
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		d.log = append(d.log, "clear")
	} else {
		d.log = append(d.log, "deadline +"+time.Until(t).String())
	}
	return nil
}

func (d *deadlineRecorder) Write(p []byte) (int, error) {
	d.log = append(d.log, "write "+string(p))
	return d.ResponseRecorder.Write(p)
}

func (d *deadlineRecorder) FlushError() error {
	d.log = append(d.log, "flush")
	return nil
}

// Every write and flush is preceded by a deadline d ahead; release
// clears it for the connection's next request.
func TestGuardWritesSetsDeadlinePerWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		w, release := guardWrites(&statusWriter{ResponseWriter: rec}, 30*time.Second)
		_, _ = w.Write([]byte("a"))
		time.Sleep(time.Second)
		_ = http.NewResponseController(w).Flush()
		release()
		want := []string{"deadline +30s", "write a", "deadline +30s", "flush", "clear"}
		if len(rec.log) != len(want) {
			t.Fatalf("log %q, want %q", rec.log, want)
		}
		for i := range want {
			if rec.log[i] != want[i] {
				t.Fatalf("log %q, want %q", rec.log, want)
			}
		}
	})
}

// The sink writes a stream through the stall guard when
// WriteStallTimeout is set, and to the client's writer itself when it is
// zero; closeGuard then leaves the connection's deadline alone.
func TestOpenSinkGuardsWritesOnlyWithATimeout(t *testing.T) {
	for _, d := range []time.Duration{0, time.Minute} {
		rec := httptest.NewRecorder()
		s := &Server{cfg: Config{WriteStallTimeout: d}}
		k := s.openSink(rec, &exchange{req: &apiRequest{Stream: true}})
		guarded := k.w != http.ResponseWriter(rec)
		if guarded != (d > 0) || (guarded && k.w != http.ResponseWriter(&k.guard)) {
			t.Fatalf("WriteStallTimeout %s: the sink writes to %T", d, k.w)
		}
		if err := k.sw.Data([]byte("x")); err != nil {
			t.Fatal(err)
		}
		k.closeGuard()
		if got := rec.Body.String(); got != "data: x\n\n" {
			t.Fatalf("WriteStallTimeout %s: body %q", d, got)
		}
	}
}

// Writes closer together than the slack (d/32, at most 100 ms) share one
// deadline: a stream's chunks do not move it twice per chunk.
func TestGuardWritesSlack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		w, release := guardWrites(&statusWriter{ResponseWriter: rec}, 30*time.Second)
		_, _ = w.Write([]byte("a"))
		_ = http.NewResponseController(w).Flush()
		time.Sleep(99 * time.Millisecond)
		_, _ = w.Write([]byte("b"))
		time.Sleep(time.Millisecond)
		_, _ = w.Write([]byte("c"))
		release()
		want := []string{"deadline +30s", "write a", "flush", "write b", "deadline +30s", "write c", "clear"}
		if len(rec.log) != len(want) {
			t.Fatalf("log %q, want %q", rec.log, want)
		}
		for i := range want {
			if rec.log[i] != want[i] {
				t.Fatalf("log %q, want %q", rec.log, want)
			}
		}
	})
}

// guardWrites wraps w with a stallWriter of d, as openSink does; call
// release when the response is over.
func guardWrites(w http.ResponseWriter, d time.Duration) (_ http.ResponseWriter, release func()) {
	if d <= 0 {
		return w, func() {}
	}
	sw := new(stallWriter)
	sw.init(w, d)
	return sw, sw.release
}
