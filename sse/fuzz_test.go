package sse

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

// FuzzDecoder checks that decoding does not depend on how the input is
// split across reads, nor on whether an event is taken whole (see
// Event.Raw): the input read line by line, the whole input, every
// two-part split and a 1-byte reader must yield the same events and the
// same final error, and every Raw must be its event's frame.
func FuzzDecoder(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.sse")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(0))
	}
	f.Add([]byte("data: a\r\n\r\n"), uint8(4))
	f.Fuzz(func(t *testing.T, in []byte, small uint8) {
		if len(in) > 2048 {
			t.Skip("quadratic in the input size")
		}
		var opts []Option
		if small > 0 {
			// Exercise ErrEventTooLarge at every position too.
			opts = append(opts, WithMaxEventBytes(int(small)))
		}
		opts = append(opts, WithComments())
		want := render(NewDecoder(bytes.NewReader(in), append(opts, byLine)...))
		if got := render(NewDecoder(bytes.NewReader(in), opts...)); got != want {
			t.Fatalf("whole:\n%s\nline by line:\n%s", got, want)
		}
		if got := render(NewDecoder(iotest.OneByteReader(bytes.NewReader(in)), opts...)); got != want {
			t.Fatalf("1-byte reader:\n%s\nline by line:\n%s", got, want)
		}
		for _, room := range []int{16, 4096} { // a Decoder read into room it was given
			var d Decoder
			d.Init(bytes.NewReader(in), make([]byte, room), opts...)
			if got := render(&d); got != want {
				t.Fatalf("room of %d bytes:\n%s\nline by line:\n%s", room, got, want)
			}
		}
		checkPeek(t, in, opts)
		for i := 1; i < len(in); i++ {
			r := &chunkReader{chunks: []string{string(in[:i]), string(in[i:])}}
			if got := render(NewDecoder(r, opts...)); got != want {
				t.Fatalf("split at %d:\n%s\nline by line:\n%s", i, got, want)
			}
		}
	})
}

// byLine makes a Decoder read every event line by line.
func byLine(d *Decoder) { d.byLine = true }

// checkPeek holds Peek to its promise: the event it lends is the next
// Borrow's, which reads nothing to return it.
func checkPeek(t *testing.T, in []byte, opts []Option) {
	r := &countingReader{r: bytes.NewReader(in)}
	d := NewDecoder(r, opts...)
	promised, ok, reads := "", false, 0
	for i := 0; i < 1<<16; i++ {
		ev, err := d.Borrow()
		if ok && (err != nil || string(ev.Data) != promised || r.reads != reads) {
			t.Fatalf("Peek promised %q; Borrow gave %q, %v after %d more reads", promised, ev.Data, err, r.reads-reads)
		}
		if err != nil {
			return
		}
		var next []byte
		next, ok = d.Peek()
		promised, reads = string(next), r.reads
	}
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}
