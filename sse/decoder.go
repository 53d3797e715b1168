package sse

import (
	"bytes"
	"errors"
	"io"
	"time"
)

// DefaultMaxEventBytes bounds one line and one event's data unless
// [WithMaxEventBytes] says otherwise.
const DefaultMaxEventBytes = 1 << 20

// ErrEventTooLarge is returned by [Decoder.Next] when a line or an event's
// data exceeds the decoder's limit. The decoder stops there.
var ErrEventTooLarge = errors.New("sse: event exceeds size limit")

// Event is one dispatched event, or a comment when Comment is true. It
// is a plain value; the zero Event is an empty "message" event.
type Event struct {
	// ID is the last event id seen on the stream so far: as in the HTML
	// specification it carries over to later events until another id
	// field replaces it.
	ID string
	// Event is the event type; empty means "message".
	Event string
	// Data is the event's data lines joined with "\n". For a comment it
	// is the comment text (one leading space removed). It is owned by the
	// caller.
	Data []byte
	// Retry is the last valid retry value seen on the stream (0 if none).
	Retry time.Duration
	// Comment marks a ":" line, returned only [WithComments].
	Comment bool
	// Raw is the event's frame as it arrived, when that is the frame a
	// [Writer] writes for it: "data: " + Data + "\n\n", after
	// "event: " + Event + "\n" for a named event. [Writer.Frame] then
	// sends it as it is, neither copied nor re-framed. It is nil for any
	// other frame (an id or retry field, several data lines, CR line
	// ends, "data:" without its space), and like Data it is the
	// caller's from Next and borrowed from Borrow.
	Raw []byte
}

// Option configures a [Decoder].
type Option func(*Decoder)

// WithComments makes Next return comment lines as events with Comment set
// instead of skipping them.
func WithComments() Option { return func(d *Decoder) { d.comments = true } }

// WithMaxEventBytes bounds a line and an event's data to n bytes (n > 0).
func WithMaxEventBytes(n int) Option {
	return func(d *Decoder) {
		if n > 0 {
			d.max = n
		}
	}
}

// Decoder reads events from a stream. Its zero value is not usable; call
// [NewDecoder]. A Decoder is not safe for concurrent use.
type Decoder struct {
	r        io.Reader
	buf      []byte // buf[off:] is input read but not yet consumed
	off      int
	rerr     error // the reader's error, seen once buf is drained
	err      error // terminal error returned by every later Next
	skipLF   bool  // the last line ended in CR; a leading LF belongs to it
	started  bool  // the first line (which may carry a BOM) was seen
	max      int
	comments bool
	byLine   bool // never take an event whole: tests hold the two paths to each other

	// the event being built
	data    []byte
	hasData bool
	event   string
	id      string
	// lastEvent is the last event name, kept to reuse its string.
	lastEvent string
	retry     time.Duration
	dirty     bool // a field line was seen since the last blank line
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader, opts ...Option) *Decoder {
	d := new(Decoder)
	d.Init(r, nil, opts...)
	return d
}

// Init readies a Decoder, one held by value in a larger struct, to read
// from r, with room for its first buffers: three quarters for the input
// read, a quarter for an event's data (nil: both are allocated when first
// needed; a longer line or event grows them). A relay that keeps a
// stream's state together gives it room beside the rest, so that a
// stream's reads touch one allocation.
func (d *Decoder) Init(r io.Reader, room []byte, opts ...Option) {
	split := len(room) * 3 / 4
	*d = Decoder{r: r, max: DefaultMaxEventBytes,
		buf: room[:0:split], data: room[split:split]} // capped: neither grows into the other
	for _, o := range opts {
		o(d)
	}
}

// Next returns the next event. At the end of the input it returns io.EOF,
// or io.ErrUnexpectedEOF when the input stopped inside an event (a
// truncated stream). Errors are terminal.
func (d *Decoder) Next() (Event, error) {
	ev, err := d.Borrow()
	switch {
	case err != nil:
	case ev.Raw != nil: // Data lies in Raw, just before its blank line
		at := len(ev.Raw) - len("\n\n") - len(ev.Data)
		ev.Raw = bytes.Clone(ev.Raw)
		ev.Data = ev.Raw[at : at+len(ev.Data)]
	default:
		ev.Data = bytes.Clone(ev.Data)
	}
	return ev, err
}

// Borrow is Next without the copy: the event's Data aliases the
// decoder's buffer and is valid only until the next call. A relay that
// writes each event on before reading the next one uses it to read a
// stream without an allocation per event.
func (d *Decoder) Borrow() (Event, error) {
	for d.err == nil {
		ev, w := d.whole()
		if w == whole {
			return ev, nil
		}
		if w == partial && d.rerr == nil && d.fill() {
			continue
		}
		line, err := d.line()
		if err != nil {
			d.err = err
			break
		}
		if ev, ok := d.process(line); ok {
			return ev, nil
		}
		if len(d.data) > d.max {
			d.err = ErrEventTooLarge
		}
	}
	return Event{}, d.err
}

// AtEOF reports whether the reader has reported the end of its input
// (io.EOF): what the stream has left is in the Decoder's buffer, and no
// later Borrow or Next waits for the reader. A relay that reads an HTTP
// body learns so that the body's end came with its last read.
func (d *Decoder) AtEOF() bool { return d.rerr == io.EOF }

// line returns the next complete line without its terminator. The slice
// aliases d.buf and is valid until the next call.
func (d *Decoder) line() ([]byte, error) {
	for stalls := 0; ; {
		if d.skipLF && d.off < len(d.buf) {
			// The LF of a CRLF that arrived in a later read.
			if d.buf[d.off] == '\n' {
				d.off++
			}
			d.skipLF = false
		}
		rest := d.buf[d.off:]
		if i := indexEOL(rest); i >= 0 {
			if i > d.max {
				return nil, ErrEventTooLarge
			}
			d.off += i + 1
			d.skipLF = rest[i] == '\r'
			return rest[:i], nil
		}
		if len(rest) > d.max {
			return nil, ErrEventTooLarge
		}
		if d.rerr != nil {
			return nil, d.endErr(len(rest) > 0)
		}
		if d.fill() {
			stalls = 0
		} else if stalls++; stalls > 100 {
			return nil, io.ErrNoProgress
		}
	}
}

// endErr is the error for the end of input; partial says an unterminated
// line was left.
func (d *Decoder) endErr(partial bool) error {
	if d.rerr != io.EOF {
		return d.rerr
	}
	if partial || d.dirty {
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}

// fill reads more input after the unconsumed tail; it reports whether any
// bytes arrived.
func (d *Decoder) fill() bool {
	n := copy(d.buf, d.buf[d.off:])
	d.buf, d.off = d.buf[:n], 0
	if n == cap(d.buf) {
		// A line longer than the buffer: grow, but only to max+1 so that
		// an overlong line is detected without buffering all of it.
		size := min(max(2*cap(d.buf), 4096), d.max+1)
		nb := make([]byte, n, size)
		copy(nb, d.buf)
		d.buf = nb
	}
	m, err := d.r.Read(d.buf[n:cap(d.buf)])
	d.buf = d.buf[:n+m]
	if err != nil {
		d.rerr = err
	}
	return m > 0 || err != nil
}
