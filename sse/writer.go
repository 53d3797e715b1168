package sse

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// ErrWritingDownstream wraps every write or flush failure of a [Writer]:
// it almost always means the client went away, and keeps such errors
// apart from upstream ones.
var ErrWritingDownstream = errors.New("sse: writing downstream")

// Writer frames events onto an http.ResponseWriter and flushes each one.
// The zero value is not usable; call [NewWriter] or [NewSerialWriter],
// or [Writer.InitSerial] on one held by value.
// A Writer from NewWriter is safe for concurrent use: a heartbeat may
// race a chunk, and one mutex keeps their frames whole. One from
// NewSerialWriter takes no lock and is for a single writing goroutine
// (one that sends its heartbeats between its chunks). After the first
// error every method returns it.
type Writer struct {
	// What every event touches comes first, together (64 bytes).
	mu     sync.Mutex // guards the fields below when shared
	shared bool       // set by NewWriter: lock mu
	header bool
	held   bool // a frame was written and not yet flushed (FrameHeld)
	err    error
	w      http.ResponseWriter
	// flush is w's own FlushError when it has one: rc.Flush would find
	// it again on every event, a dynamic interface lookup.
	flush interface{ FlushError() error }

	rc  http.ResponseController
	buf []byte // frame scratch, reused so Data does not allocate; starts as room
	// room holds a token chunk's frame: with rc, it keeps what an event
	// touches in the Writer's own memory, which on a busy gateway is cold
	// in the cache by the stream's next event.
	room [frameRoom]byte
}

// frameRoom fits the frame of a chat token chunk (vLLM's are 200-300
// bytes); a longer frame grows buf on the heap once.
const frameRoom = 512

// NewWriter returns a Writer on w. Flushes go through
// http.NewResponseController, so wrappers of w must have an
// Unwrap() http.ResponseWriter method for them to reach the connection.
func NewWriter(w http.ResponseWriter) *Writer {
	sw := new(Writer)
	sw.init(w, true)
	return sw
}

// NewSerialWriter is NewWriter for a Writer that one goroutine uses: its
// methods take no lock.
func NewSerialWriter(w http.ResponseWriter) *Writer {
	sw := new(Writer)
	sw.init(w, false)
	return sw
}

// InitSerial makes sw, a zero Writer held by value, what NewSerialWriter
// returns: a caller keeps it in the struct that holds the rest of a
// response's state, one allocation instead of two. sw must not be copied
// after.
func (sw *Writer) InitSerial(w http.ResponseWriter) { sw.init(w, false) }

func (sw *Writer) init(w http.ResponseWriter, shared bool) {
	sw.shared, sw.w, sw.rc = shared, w, *http.NewResponseController(w)
	sw.flush, _ = w.(interface{ FlushError() error })
	sw.buf = sw.room[:0]
}

func (sw *Writer) lock() {
	if sw.shared {
		sw.mu.Lock()
	}
}

func (sw *Writer) unlock() {
	if sw.shared {
		sw.mu.Unlock()
	}
}

// WriteHeader sends the status with the event-stream headers. It is
// called with 200 by the first event if not before; later calls do
// nothing. Connection: keep-alive only matters to HTTP/1 peers; Go's
// HTTP/2 server removes it, as RFC 9113 requires.
func (sw *Writer) WriteHeader(status int) {
	sw.lock()
	defer sw.unlock()
	sw.writeHeader(status)
}

// writeHeader requires sw.lock held.
func (sw *Writer) writeHeader(status int) {
	if sw.header {
		return
	}
	sw.header = true
	h := sw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	// Tells nginx-style proxies not to buffer the stream.
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	sw.w.WriteHeader(status)
}

// HeaderWritten reports whether the status line has been sent: after
// that, errors can only be reported inside the stream.
func (sw *Writer) HeaderWritten() bool {
	sw.lock()
	defer sw.unlock()
	return sw.header
}

// Data sends p as one event: "data: <line>\n" per line of p, then a blank
// line. An empty p sends "data: \n\n".
func (sw *Writer) Data(p []byte) error {
	sw.lock()
	defer sw.unlock()
	sw.buf = appendField(sw.buf[:0], "data: ", p)
	sw.buf = append(sw.buf, '\n')
	return sw.send()
}

// Event sends a named event ("event: name\n" followed by data lines).
func (sw *Writer) Event(name string, data []byte) error {
	if strings.ContainsAny(name, "\r\n") {
		return fmt.Errorf("sse: event name %q contains a line break", name)
	}
	sw.lock()
	defer sw.unlock()
	sw.buf = append(append(append(sw.buf[:0], "event: "...), name...), '\n')
	sw.buf = appendField(sw.buf, "data: ", data)
	sw.buf = append(sw.buf, '\n')
	return sw.send()
}

// Comment sends ": text\n\n", which clients ignore: a keep-alive or a
// progress note.
func (sw *Writer) Comment(text string) error {
	sw.lock()
	defer sw.unlock()
	sw.buf = appendField(sw.buf[:0], ": ", []byte(text))
	sw.buf = append(sw.buf, '\n')
	return sw.send()
}

// Frame sends an event a Decoder read, in the frame it arrived in (its
// Event.Raw), as it is: what Data or Event would send for it, without
// building the frame again. A frame that does not end in a blank line is
// refused, and nothing is written.
func (sw *Writer) Frame(raw []byte) error { return sw.frame(raw, true) }

var (
	blankLine    = []byte("\n\n")
	errNotAFrame = errors.New("sse: a frame must end in a blank line")
)

// FrameHeld is Frame without the flush: the frame waits in the response's
// buffer for the next event's flush, or for Flush. A relay holds an event
// whose successor is already in its hands, so that both go out in one
// write; it must then send that successor, or call Flush, before it
// waits for anything.
func (sw *Writer) FrameHeld(raw []byte) error { return sw.frame(raw, false) }

// frame writes raw, a whole frame, and flushes it if flush is set.
func (sw *Writer) frame(raw []byte, flush bool) error {
	if !bytes.HasSuffix(raw, blankLine) {
		return errNotAFrame
	}
	sw.lock()
	defer sw.unlock()
	if flush {
		return sw.write(raw)
	}
	return sw.put(raw)
}

// Flush sends what FrameHeld holds; without it, it does nothing.
func (sw *Writer) Flush() error {
	sw.lock()
	defer sw.unlock()
	if !sw.held || sw.err != nil {
		return sw.err
	}
	return sw.flushHeld()
}

// Done sends the OpenAI end-of-stream marker "data: [DONE]\n\n".
func (sw *Writer) Done() error { return sw.Data(doneData) }

// DoneHeld is Done without the flush, for a stream whose response ends
// at once (its handler returns): net/http then writes the marker, and
// anything held before it, in one write with the body's end. A client
// that stops reading at [DONE] finds the body over in what it read, and
// an HTTP/1.1 client keeps its connection only then (Go's, for one,
// closes a connection whose body was closed before its end).
func (sw *Writer) DoneHeld() error {
	sw.lock()
	defer sw.unlock()
	return sw.put(doneFrame)
}

var (
	doneData  = []byte("[DONE]")
	doneFrame = []byte("data: [DONE]\n\n")
)

// send writes sw.buf and flushes; requires sw.lock held.
func (sw *Writer) send() error { return sw.write(sw.buf) }

// write writes frame and flushes; requires sw.lock held.
func (sw *Writer) write(frame []byte) error {
	if err := sw.put(frame); err != nil {
		return err
	}
	return sw.flushHeld()
}

// put writes frame without flushing; requires sw.lock held.
func (sw *Writer) put(frame []byte) error {
	if sw.err != nil {
		return sw.err
	}
	sw.writeHeader(http.StatusOK)
	if _, err := sw.w.Write(frame); err != nil {
		sw.err = fmt.Errorf("%w: %w", ErrWritingDownstream, err)
		return sw.err
	}
	sw.held = true
	return nil
}

// flushHeld flushes; requires sw.lock held.
func (sw *Writer) flushHeld() error {
	sw.held = false
	if err := sw.flushNow(); err != nil {
		sw.err = fmt.Errorf("%w: flush: %w", ErrWritingDownstream, err)
		return sw.err
	}
	return nil
}

// flushNow flushes w as http.ResponseController.Flush would.
func (sw *Writer) flushNow() error {
	if sw.flush != nil {
		return sw.flush.FlushError()
	}
	return sw.rc.Flush()
}

// appendField appends prefix+line+"\n" for each line of p, splitting on
// LF, CR and CRLF so that no byte of p can end the event early.
func appendField(dst []byte, prefix string, p []byte) []byte {
	for {
		i := indexEOL(p)
		if i < 0 {
			dst = append(append(dst, prefix...), p...)
			return append(dst, '\n')
		}
		dst = append(append(dst, prefix...), p[:i]...)
		dst = append(dst, '\n')
		if p[i] == '\r' && i+1 < len(p) && p[i+1] == '\n' {
			i++
		}
		p = p[i+1:]
	}
}

// indexEOL is the index of the first CR or LF in p, or -1. It is
// bytes.IndexAny(p, "\r\n") with two vectorised IndexByte scans instead
// of a byte-at-a-time set lookup: every chunk of a stream passes through
// it, and chunks rarely hold either byte.
func indexEOL(p []byte) int {
	i := bytes.IndexByte(p, '\n')
	before := p
	if i >= 0 {
		before = p[:i]
	}
	if j := bytes.IndexByte(before, '\r'); j >= 0 {
		return j
	}
	return i
}
