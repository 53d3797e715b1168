package sse

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.events")

// render prints decoded events and the final error, one per line, so
// that runs can be compared and kept as golden files.
func render(d *Decoder) string {
	var b strings.Builder
	for i := 0; i < 1<<16; i++ {
		ev, err := d.Next()
		if err != nil {
			fmt.Fprintf(&b, "end %v\n", err)
			return b.String()
		}
		fmt.Fprintf(&b, "id=%q event=%q retry=%s comment=%v data=%q\n", ev.ID, ev.Event, ev.Retry, ev.Comment, ev.Data)
		if ev.Raw != nil && string(ev.Raw) != frameOf(ev) {
			fmt.Fprintf(&b, "raw %q is not the event's frame %q\n", ev.Raw, frameOf(ev))
		}
	}
	return b.String() + "end: too many events\n"
}

// frameOf is the frame a Writer writes for ev.
func frameOf(ev Event) string {
	var rec strings.Builder
	if ev.Event != "" {
		rec.WriteString("event: " + ev.Event + "\n")
	}
	return rec.String() + string(appendField(nil, "data: ", ev.Data)) + "\n"
}

func TestDecoderGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.sse")
	if len(files) == 0 {
		t.Fatal("no testdata/*.sse")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := render(NewDecoder(bytes.NewReader(in), WithComments()))
			golden := strings.TrimSuffix(f, ".sse") + ".events"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestDecoderCases(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		opts     []Option
		want     string
	}{
		{"lf", "data: a\n\n", nil, `id="" event="" retry=0s comment=false data="a"` + "\nend EOF\n"},
		{"one space stripped", "data:  a \n\n", nil, `id="" event="" retry=0s comment=false data=" a "` + "\nend EOF\n"},
		{"no space", "data:a\n\n", nil, `id="" event="" retry=0s comment=false data="a"` + "\nend EOF\n"},
		{"multi-line joined", "data: a\ndata: b\n\n", nil, `id="" event="" retry=0s comment=false data="a\nb"` + "\nend EOF\n"},
		{"empty data dispatches", "data\n\n", nil, `id="" event="" retry=0s comment=false data=""` + "\nend EOF\n"},
		{"no data no event", "event: x\n\nid: 3\n\n", nil, "end EOF\n"},
		{"comments skipped", ": ka\n\ndata: a\n\n", nil, `id="" event="" retry=0s comment=false data="a"` + "\nend EOF\n"},
		{"crlf split blank", "data: a\r\n\r\n", nil, `id="" event="" retry=0s comment=false data="a"` + "\nend EOF\n"},
		{"truncated", "data: a\n", nil, "end unexpected EOF\n"},
		{"partial line", "data: a\n\nda", nil, `id="" event="" retry=0s comment=false data="a"` + "\nend unexpected EOF\n"},
		{"line too long", "data: 0123456789\n\n", []Option{WithMaxEventBytes(8)}, "end sse: event exceeds size limit\n"},
		{"data too long", "data:12345\ndata:12345\n\n", []Option{WithMaxEventBytes(11)}, "end sse: event exceeds size limit\n"},
		{"id persists", "id: 1\ndata: a\n\ndata: b\n\n", nil,
			`id="1" event="" retry=0s comment=false data="a"` + "\n" + `id="1" event="" retry=0s comment=false data="b"` + "\nend EOF\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range readers(tc.in) {
				if got := render(NewDecoder(r, tc.opts...)); got != tc.want {
					t.Errorf("%T: got\n%s\nwant\n%s", r, got, tc.want)
				}
			}
		})
	}
}

func readers(s string) []io.Reader {
	return []io.Reader{strings.NewReader(s), iotest.OneByteReader(strings.NewReader(s)), iotest.HalfReader(strings.NewReader(s))}
}

// A CRLF whose LF arrives in the next read must not count as a blank line.
func TestDecoderCRLFSplitAcrossReads(t *testing.T) {
	r := &chunkReader{chunks: []string{"data: a\r", "\ndata: b\r", "\n\r", "\n"}}
	ev, err := NewDecoder(r).Next()
	if err != nil || string(ev.Data) != "a\nb" {
		t.Fatalf("Next = %q, %v; want \"a\\nb\"", ev.Data, err)
	}
}

func TestDecoderReadError(t *testing.T) {
	boom := errors.New("reset")
	d := NewDecoder(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
	if ev, err := d.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("first = %q, %v", ev.Data, err)
	}
	for range 2 { // terminal: the same error again
		if _, err := d.Next(); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
	}
}

func TestDecoderNoProgress(t *testing.T) {
	_, err := NewDecoder(zeroReader{}).Next()
	if !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

func TestDecoderRetry(t *testing.T) {
	ev, err := NewDecoder(strings.NewReader("retry: 1500\ndata: x\n\n")).Next()
	if err != nil || ev.Retry != 1500*time.Millisecond {
		t.Fatalf("Retry = %v, %v", ev.Retry, err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// chunkReader returns its chunks one Read at a time, then io.EOF.
type chunkReader struct{ chunks []string }

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

func BenchmarkDecoder(b *testing.B) {
	in, err := os.ReadFile("testdata/vllm_usage.sse")
	if err != nil {
		b.Fatal(err)
	}
	in = bytes.Repeat(in, 100)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(bytes.NewReader(in))
		for {
			if _, err := d.Next(); err != nil {
				break
			}
		}
	}
}

// A Decoder held by value reads into the room it is given, growing past
// it only for a longer line, and decodes the same events whatever the
// room: none, smaller than a line, or enough.
func TestDecoderInitReadsIntoItsRoom(t *testing.T) {
	long := strings.Repeat("y", 100)
	input := "data: {\"a\":1}\n\nevent: x\ndata: " + long + "\n\n"
	for _, room := range [][]byte{nil, make([]byte, 8), make([]byte, 4096)} {
		var d Decoder
		d.Init(strings.NewReader(input), room)
		var got []string
		for {
			ev, err := d.Next()
			if err != nil {
				break
			}
			got = append(got, ev.Event+"|"+string(ev.Data))
		}
		if want := []string{`|{"a":1}`, "x|" + long}; !slices.Equal(got, want) {
			t.Errorf("room of %d bytes: %q; want %q", len(room), got, want)
		}
	}
	var d Decoder
	room, r := make([]byte, 4096), strings.NewReader("")
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset("data: {\"a\":1}\n\ndata: [DONE]\n\n")
		d.Init(r, room)
		for {
			if _, err := d.Borrow(); err != nil {
				return
			}
		}
	})
	if allocs != 0 {
		t.Errorf("a stream read into its room allocates %.0f times, want 0", allocs)
	}
}
