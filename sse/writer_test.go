package sse

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// wrappedRW hides the recorder's Flush behind a wrapper, as a status or
// metrics middleware would; Unwrap lets the ResponseController find it.
type wrappedRW struct{ http.ResponseWriter }

func (w wrappedRW) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// flushCounter counts flushes that reach the underlying writer.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

func TestWriterFramesAndFlushesThroughWrapper(t *testing.T) {
	fc := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	sw := NewWriter(wrappedRW{fc})
	if sw.HeaderWritten() {
		t.Fatal("HeaderWritten before any write")
	}
	steps := []func() error{
		func() error { return sw.Comment("queued position=2") },
		func() error { return sw.Data([]byte(`{"a":1}`)) },
		func() error { return sw.Data([]byte("x\ny\r\nz\r")) },
		func() error { return sw.Event("update", []byte("u")) },
		func() error { return sw.Data(nil) },
		sw.Done,
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if fc.flushes != i+1 {
			t.Fatalf("step %d: %d flushes reached the connection, want %d", i, fc.flushes, i+1)
		}
	}
	want := ": queued position=2\n\n" +
		"data: {\"a\":1}\n\n" +
		"data: x\ndata: y\ndata: z\ndata: \n\n" +
		"event: update\ndata: u\n\n" +
		"data: \n\n" +
		"data: [DONE]\n\n"
	if got := fc.Body.String(); got != want {
		t.Errorf("body:\n%q\nwant\n%q", got, want)
	}
	h := fc.Header()
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"} {
		if h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, h.Get(k), v)
		}
	}
	if fc.Code != http.StatusOK || !sw.HeaderWritten() {
		t.Errorf("code %d, HeaderWritten %v", fc.Code, sw.HeaderWritten())
	}
}

// What the writer emits, the decoder reads back.
func TestWriterRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := NewWriter(rec)
	payloads := []string{"a", "multi\nline", "", "cr\rlf\r\nend"}
	for _, p := range payloads {
		if err := sw.Data([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	d := NewDecoder(strings.NewReader(rec.Body.String()))
	for _, p := range payloads {
		ev, err := d.Next()
		want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(p)
		if err != nil || string(ev.Data) != want {
			t.Fatalf("decoded %q, %v; want %q", ev.Data, err, want)
		}
	}
}

func TestWriterExplicitStatus(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := NewWriter(rec)
	sw.WriteHeader(http.StatusAccepted)
	sw.WriteHeader(http.StatusTeapot) // ignored
	if err := sw.Done(); err != nil || rec.Code != http.StatusAccepted {
		t.Fatalf("code %d, err %v", rec.Code, err)
	}
}

type failingRW struct {
	http.ResponseWriter
	writes int
}

var errGone = errors.New("broken pipe")

func (f *failingRW) Write([]byte) (int, error) { f.writes++; return 0, errGone }

func TestWriterErrorsAreWrappedAndSticky(t *testing.T) {
	f := &failingRW{ResponseWriter: httptest.NewRecorder()}
	sw := NewWriter(f)
	err := sw.Data([]byte("x"))
	if !errors.Is(err, ErrWritingDownstream) || !errors.Is(err, errGone) {
		t.Fatalf("err = %v", err)
	}
	if err2 := sw.Comment("ka"); !errors.Is(err2, ErrWritingDownstream) || f.writes != 1 {
		t.Fatalf("second call: %v after %d writes", err2, f.writes)
	}
}

// noFlush hides Flush and has no Unwrap: flushes cannot reach the
// connection, and the writer must say so rather than buffer silently.
type noFlush struct{ w http.ResponseWriter }

func (n noFlush) Header() http.Header         { return n.w.Header() }
func (n noFlush) Write(p []byte) (int, error) { return n.w.Write(p) }
func (n noFlush) WriteHeader(s int)           { n.w.WriteHeader(s) }

func TestWriterReportsMissingFlusher(t *testing.T) {
	err := NewWriter(noFlush{httptest.NewRecorder()}).Data([]byte("x"))
	if !errors.Is(err, http.ErrNotSupported) || !errors.Is(err, ErrWritingDownstream) {
		t.Fatalf("err = %v", err)
	}
}

// An event name with a line break would end the "event:" line early and
// let the rest of the name inject fields: it is refused and nothing at all
// is written, not even the headers.
func TestWriterEventNameWithLineBreakWritesNothing(t *testing.T) {
	for _, name := range []string{"a\nb", "a\rb", "a\r\ndata: x"} {
		rec := httptest.NewRecorder()
		sw := NewWriter(rec)
		err := sw.Event(name, []byte("d"))
		if want := fmt.Sprintf("sse: event name %q contains a line break", name); err == nil || err.Error() != want {
			t.Errorf("Event(%q) = %v, want %s", name, err, want)
		}
		if rec.Body.Len() != 0 || sw.HeaderWritten() {
			t.Errorf("Event(%q) wrote %q (headers written: %v), want nothing", name, rec.Body.String(), sw.HeaderWritten())
		}
	}
}

// Every line of a comment is sent as a comment: whatever the text holds,
// a client decodes no event from it.
func TestWriterMultiLineCommentCannotInjectEvents(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := NewWriter(rec).Comment("a\ndata: x\r\n\r\nb\rdata: y"); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), ": a\n: data: x\n: \n: b\n: data: y\n\n"; got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
	if ev, err := NewDecoder(strings.NewReader(rec.Body.String())).Next(); err != io.EOF {
		t.Fatalf("decoded %+v, %v from a comment; want no event (EOF)", ev, err)
	}
}

// A heartbeat racing chunks must never interleave inside a frame.
func TestWriterConcurrent(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := NewWriter(rec)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for range 100 {
				if g == 0 {
					_ = sw.Comment("ka")
				} else {
					_ = sw.Data([]byte(`{"k":"v"}`))
				}
			}
		})
	}
	wg.Wait()
	frames := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n")
	if len(frames) != 400 {
		t.Fatalf("%d frames, want 400", len(frames))
	}
	for _, f := range frames {
		if f != ": ka" && f != `data: {"k":"v"}` {
			t.Fatalf("torn frame %q", f)
		}
	}
}

type discardRW struct{ h http.Header }

func (d *discardRW) Header() http.Header         { return d.h }
func (d *discardRW) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardRW) WriteHeader(int)             {}
func (d *discardRW) Flush()                      {}

func BenchmarkWriterData(b *testing.B) {
	sw := NewWriter(&discardRW{h: http.Header{}})
	p := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok1 "},"logprobs":null,"finish_reason":null}]}`)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if err := sw.Data(p); err != nil {
			b.Fatal(err)
		}
	}
}

// indexEOL must agree with bytes.IndexAny(p, "\r\n") on every input.
func TestIndexEOL(t *testing.T) {
	for _, s := range []string{"", "a", "\n", "\r", "\r\n", "\n\r", "ab\ncd\re", "ab\rcd\ne", "abc", strings.Repeat("x", 100) + "\r" + strings.Repeat("y", 50) + "\n"} {
		if got, want := indexEOL([]byte(s)), strings.IndexAny(s, "\r\n"); got != want {
			t.Errorf("indexEOL(%q) = %d, want %d", s, got, want)
		}
	}
}

// A serial Writer frames exactly as a shared one: only the lock differs.
func TestSerialWriterFramesLikeShared(t *testing.T) {
	write := func(sw *Writer) {
		_ = sw.Comment("queued position=1")
		_ = sw.Data([]byte("a\r\nb"))
		_ = sw.Event("response.completed", []byte(`{"x":1}`))
		_ = sw.Done()
	}
	shared, serial := httptest.NewRecorder(), httptest.NewRecorder()
	write(NewWriter(shared))
	write(NewSerialWriter(serial))
	want := ": queued position=1\n\ndata: a\ndata: b\n\nevent: response.completed\ndata: {\"x\":1}\n\ndata: [DONE]\n\n"
	if shared.Body.String() != want || serial.Body.String() != want {
		t.Fatalf("shared %q\nserial %q\nwant %q", shared.Body, serial.Body, want)
	}
	if serial.Header().Get("Content-Type") != "text/event-stream" || !serial.Flushed {
		t.Fatalf("serial headers %v, flushed %v", serial.Header(), serial.Flushed)
	}
}

func BenchmarkSerialWriterData(b *testing.B) {
	sw := NewSerialWriter(&discardRW{h: http.Header{}})
	p := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok1 "},"logprobs":null,"finish_reason":null}]}`)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if err := sw.Data(p); err != nil {
			b.Fatal(err)
		}
	}
}
