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

func TestGuardWritesZeroIsOff(t *testing.T) {
	rec := httptest.NewRecorder()
	w, release := guardWrites(rec, 0)
	release()
	if w != http.ResponseWriter(rec) {
		t.Fatal("a zero timeout wrapped the writer")
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
