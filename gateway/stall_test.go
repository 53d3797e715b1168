package gateway

import (
	"fmt"
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

// Every write and flush is preceded by a deadline d ahead; it stays for
// net/http's own last write, and net/http clears it after that.
func TestGuardWritesSetsDeadlinePerWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		w := guardWrites(&statusWriter{ResponseWriter: rec}, 30*time.Second)
		_, _ = w.Write([]byte("a"))
		time.Sleep(time.Second)
		_ = http.NewResponseController(w).Flush()
		want := []string{"deadline +30s", "write a", "deadline +30s", "flush"}
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
// zero.
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
		if got := rec.Body.String(); got != "data: x\n\n" {
			t.Fatalf("WriteStallTimeout %s: body %q", d, got)
		}
	}
}

// Writes closer together than the slack (d/32, at most a second) share one
// deadline: a stream's chunks do not move it twice per chunk.
func TestGuardWritesSlack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		w := guardWrites(&statusWriter{ResponseWriter: rec}, time.Minute)
		_, _ = w.Write([]byte("a"))
		_ = http.NewResponseController(w).Flush()
		time.Sleep(999 * time.Millisecond)
		_, _ = w.Write([]byte("b"))
		time.Sleep(time.Millisecond)
		_, _ = w.Write([]byte("c"))
		want := []string{"deadline +1m0s", "write a", "flush", "write b", "deadline +1m0s", "write c"}
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

// guardWrites wraps w with a stallWriter of d, as openSink does.
func guardWrites(w http.ResponseWriter, d time.Duration) http.ResponseWriter {
	if d <= 0 {
		return w
	}
	sw := new(stallWriter)
	sw.init(w, d)
	return sw
}

// The header goes through the status recorders the guard was given (each
// notes the status); the body's writes and flushes then go to the writer
// beneath them.
func TestGuardWritesBodyBeneathStatusRecorders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		outer := &statusWriter{ResponseWriter: &statusWriter{ResponseWriter: rec}}
		var g stallWriter
		g.init(outer, time.Minute)
		g.WriteHeader(http.StatusCreated)
		if inner := outer.ResponseWriter.(*statusWriter); outer.status != http.StatusCreated || inner.status != http.StatusCreated {
			t.Fatalf("statuses noted %d and %d, want 201", outer.status, inner.status)
		}
		if g.body != http.ResponseWriter(rec) {
			t.Fatalf("after the header the body goes to %T, want the recorder", g.body)
		}
		if _, err := g.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := http.NewResponseController(&g).Flush(); err != nil {
			t.Fatal(err)
		}
		want := []string{"deadline +1m0s", "write x", "flush"}
		if fmt.Sprint(rec.log) != fmt.Sprint(want) || rec.Code != http.StatusCreated {
			t.Fatalf("log %q and status %d, want %q and 201", rec.log, rec.Code, want)
		}
	})
}
