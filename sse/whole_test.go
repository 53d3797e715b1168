package sse

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// An event that lies whole in the buffer in a Writer's frame comes with
// that frame as its Raw; any other frame comes without one, and decodes
// as it did before.
func TestDecoderRaw(t *testing.T) {
	for _, c := range []struct {
		in, raw, name, data, id string
	}{
		{in: "data: {\"a\":1}\n\n", raw: "data: {\"a\":1}\n\n", data: `{"a":1}`},
		{in: "event: response.created\ndata: {}\n\n", raw: "event: response.created\ndata: {}\n\n", name: "response.created", data: "{}"},
		{in: "data:  two spaces\n\n", raw: "data:  two spaces\n\n", data: " two spaces"},
		{in: "data: \n\n", raw: "data: \n\n", data: ""},
		{in: "id: 7\n\ndata: x\n\n", raw: "data: x\n\n", data: "x", id: "7"}, // the id carries over
		{in: "data:x\n\n", data: "x"},
		{in: "data\n\n", data: ""},
		{in: "event: \ndata: x\n\n", data: "x"},
		{in: "id: 1\ndata: x\n\n", data: "x", id: "1"},
		{in: "data: a\ndata: b\n\n", data: "a\nb"},
		{in: "data: a\r\n\r\n", data: "a"},
		{in: "data: a\n\r\n", data: "a"},
		{in: "event: e\r\ndata: a\n\n", name: "e", data: "a"},
		{in: ": note\ndata: a\n\n", raw: "data: a\n\n", data: "a"}, // a comment is no part of the frame
		{in: "\xEF\xBB\xBFdata: a\n\n", data: "a"},
		{in: "data: a\n", data: ""}, // no blank line: a truncated stream
	} {
		ev, err := NewDecoder(strings.NewReader(c.in)).Next()
		if strings.HasSuffix(c.in, "\n\n") || strings.HasSuffix(c.in, "\r\n") {
			if err != nil || string(ev.Raw) != c.raw || (c.raw == "") != (ev.Raw == nil) ||
				ev.Event != c.name || string(ev.Data) != c.data || ev.ID != c.id {
				t.Errorf("%q: raw %q event %q data %q id %q, %v; want raw %q event %q data %q id %q",
					c.in, ev.Raw, ev.Event, ev.Data, ev.ID, err, c.raw, c.name, c.data, c.id)
			}
			continue
		}
		if err != io.ErrUnexpectedEOF {
			t.Errorf("%q: %v, want io.ErrUnexpectedEOF", c.in, err)
		}
	}
}

// A frame that arrives in pieces is read on until it is whole: it comes
// with its Raw too.
func TestDecoderRawInPieces(t *testing.T) {
	const in = "data: 1\n\nevent: e\ndata: 2\n\n"
	d := NewDecoder(iotest.OneByteReader(strings.NewReader(in)))
	for _, want := range []string{"data: 1\n\n", "event: e\ndata: 2\n\n"} {
		if ev, err := d.Borrow(); err != nil || string(ev.Raw) != want {
			t.Fatalf("raw %q, %v; want %q", ev.Raw, err, want)
		}
	}
	if _, err := d.Borrow(); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

// Next's Raw and Data are the caller's: the next read does not change
// them, and Data still lies in Raw.
func TestDecoderNextOwnsRaw(t *testing.T) {
	d := NewDecoder(strings.NewReader("data: first\n\ndata: other\n\n"))
	ev, err := d.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	if string(ev.Raw) != "data: first\n\n" || string(ev.Data) != "first" || &ev.Raw[len("data: ")] != &ev.Data[0] {
		t.Fatalf("raw %q data %q after the next read", ev.Raw, ev.Data)
	}
}

// Frame sends the frame as it is, with the stream's header, and flushes;
// one that does not end in a blank line writes nothing.
func TestWriterFrame(t *testing.T) {
	fc := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	sw := NewSerialWriter(wrappedRW{fc})
	if err := sw.Frame([]byte("data: x")); err == nil || err.Error() != "sse: a frame must end in a blank line" || sw.HeaderWritten() {
		t.Fatalf("a frame without its blank line: %v, header written %v", err, sw.HeaderWritten())
	}
	for _, f := range []string{"data: {\"a\":1}\n\n", "event: e\ndata: 2\n\n"} {
		if err := sw.Frame([]byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	const want = "data: {\"a\":1}\n\nevent: e\ndata: 2\n\n"
	if fc.Body.String() != want || fc.flushes != 2 || fc.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("body %q, %d flushes, type %q; want %q, 2", fc.Body, fc.flushes, fc.Header().Get("Content-Type"), want)
	}
}

// Peek lends the next event's data when it is here whole in a Writer's
// frame, without taking it: the next Borrow returns that event.
func TestDecoderPeek(t *testing.T) {
	for _, c := range []struct {
		in   string
		next string // "" when Peek must say no
	}{
		{"data: 1\n\ndata: 2\n\n", "2"},
		{"data: 1\n\nevent: e\ndata: 2\n\n", "2"},
		{"data: 1\n\ndata: [DONE]\n\n", "[DONE]"},
		{"data: 1\n\n", ""},
		{"data: 1\n\ndata: 2\n", ""},           // its blank line has not arrived
		{"data: 1\n\n: note\ndata: 2\n\n", ""}, // a comment first: not a Writer's frame
		{"data: 1\n\ndata:2\n\n", ""},
		{"data: 1\r\rdata: 2\n\n", "2"},     // CR line ends before it do not matter
		{"data: 1\r\n\r\ndata: 2\n\n", "2"}, // the LF of the last CRLF is skipped
	} {
		d := NewDecoder(strings.NewReader(c.in))
		if _, err := d.Borrow(); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		next, ok := d.Peek()
		if ok != (c.next != "") || string(next) != c.next {
			t.Errorf("%q: Peek %q, %v; want %q", c.in, next, ok, c.next)
			continue
		}
		if ev, err := d.Borrow(); ok && (err != nil || string(ev.Data) != c.next) {
			t.Errorf("%q: the next event is %q, %v; Peek said %q", c.in, ev.Data, err, c.next)
		}
	}
}

// FrameHeld writes without flushing: the next event's flush, or Flush,
// sends both at once; Flush with nothing held sends nothing.
func TestWriterFrameHeld(t *testing.T) {
	fc := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	sw := NewSerialWriter(wrappedRW{fc})
	if err := sw.FrameHeld([]byte("data: 1")); err == nil || sw.HeaderWritten() {
		t.Fatalf("a frame without its blank line: %v, header written %v", err, sw.HeaderWritten())
	}
	steps := []struct {
		do      func() error
		flushes int
	}{
		{func() error { return sw.FrameHeld([]byte("data: 1\n\n")) }, 0},
		{func() error { return sw.FrameHeld([]byte("event: e\ndata: 2\n\n")) }, 0},
		{sw.Done, 1},
		{sw.Flush, 1},
		{func() error { return sw.FrameHeld([]byte("data: 3\n\n")) }, 1},
		{sw.Flush, 2},
		{sw.Flush, 2},
	}
	for i, s := range steps {
		if err := s.do(); err != nil || fc.flushes != s.flushes {
			t.Fatalf("step %d: %v, %d flushes; want %d", i, err, fc.flushes, s.flushes)
		}
	}
	const want = "data: 1\n\nevent: e\ndata: 2\n\ndata: [DONE]\n\ndata: 3\n\n"
	if fc.Body.String() != want {
		t.Fatalf("body %q, want %q", fc.Body, want)
	}
}

// DoneHeld writes the end marker without a flush, after what was held:
// the response's end sends them, in the write that ends the body.
func TestWriterDoneHeld(t *testing.T) {
	fc := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	sw := NewSerialWriter(wrappedRW{fc})
	if err := sw.FrameHeld([]byte("data: 1\n\n")); err != nil {
		t.Fatal(err)
	}
	if err := sw.DoneHeld(); err != nil || fc.flushes != 0 {
		t.Fatalf("DoneHeld: %v, %d flushes; want none", err, fc.flushes)
	}
	const want = "data: 1\n\ndata: [DONE]\n\n"
	if fc.Body.String() != want || fc.Code != http.StatusOK {
		t.Fatalf("status %d, body %q; want 200, %q", fc.Code, fc.Body, want)
	}
}

// AtEOF tells whether the reader's end came with what was read: a body
// whose last read also returned io.EOF has nothing left to wait for.
func TestDecoderAtEOF(t *testing.T) {
	const stream = "data: 1\n\ndata: [DONE]\n\n"
	cases := []struct {
		name string
		r    io.Reader
		want bool
	}{
		{"the end with the data", iotest.DataErrReader(strings.NewReader(stream)), true},
		{"the end in a read of its own", strings.NewReader(stream), false},
	}
	for _, c := range cases {
		d := NewDecoder(c.r)
		if d.AtEOF() {
			t.Fatalf("%s: at EOF before a read", c.name)
		}
		if ev, err := d.Borrow(); err != nil || string(ev.Data) != "1" {
			t.Fatalf("%s: first event %q, %v", c.name, ev.Data, err)
		}
		if next, ok := d.Peek(); !ok || string(next) != "[DONE]" {
			t.Fatalf("%s: Peek %q, %v; want [DONE] read already", c.name, next, ok)
		}
		if got := d.AtEOF(); got != c.want {
			t.Fatalf("%s: AtEOF %v, want %v", c.name, got, c.want)
		}
	}
}
