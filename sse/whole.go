package sse

import "bytes"

var (
	dataPrefix  = []byte("data: ")
	eventPrefix = []byte("event: ")
)

// A wholeness says whether the buffer starts with a whole event in a
// Writer's own frame (see Event.Raw).
type wholeness int

const (
	whole   wholeness = iota
	partial           // the start of one: read on, and look again
	other             // something else: the line-by-line path reads it
)

// whole takes the next event at once when it lies whole in the buffer in
// a Writer's own frame, as nearly every event of a model server's stream
// does: its Data and Raw alias the buffer, so the event is neither
// copied into the data buffer nor framed again by the relay that writes
// it on. Anything else, and any event that starts while another is being
// built, is left to the line-by-line path, which decodes it the same.
func (d *Decoder) whole() (Event, wholeness) {
	if d.dirty || d.byLine {
		return Event{}, other
	}
	if d.skipLF { // the last line ended in CR: a leading LF belongs to it
		if d.off == len(d.buf) {
			return Event{}, partial
		}
		if d.buf[d.off] == '\n' {
			d.off++
		}
		d.skipLF = false
	}
	rest := d.buf[d.off:]
	f, w := d.frameAt(rest)
	if w != whole {
		return Event{}, w
	}
	d.off += f.size
	d.started = true
	ev := Event{ID: d.id, Retry: d.retry, Data: f.data, Raw: rest[:f.size]}
	if f.name != nil {
		ev.Event = reuse(d.lastEvent, f.name)
		d.lastEvent = ev.Event
	}
	return ev, whole
}

// Peek returns the data of the next event without taking it, when it
// lies whole in what was read in a Writer's own frame (see Event.Raw):
// an event that is already here and will come from the next Borrow
// without a read. It reports false otherwise (nothing, or not all of it,
// has arrived; or it is framed otherwise). The data is valid until the
// next Borrow.
func (d *Decoder) Peek() ([]byte, bool) {
	if d.dirty || d.byLine || d.err != nil {
		return nil, false
	}
	rest := d.buf[d.off:]
	if d.skipLF && len(rest) > 0 && rest[0] == '\n' {
		rest = rest[1:]
	}
	f, w := d.frameAt(rest)
	return f.data, w == whole
}

// frame is where a whole frame lies at the start of the input.
type frame struct {
	name, data []byte // name is nil without an event line
	size       int
}

// frameAt finds the frame at the start of rest, which starts a line.
func (d *Decoder) frameAt(rest []byte) (frame, wholeness) {
	if !d.started {
		if bytes.HasPrefix(rest, bom) {
			return frame{}, other
		}
		if len(rest) < len(bom) && bytes.HasPrefix(bom, rest) {
			return frame{}, partial
		}
	}
	name, body := []byte(nil), rest
	switch starts(rest, eventPrefix) {
	case partial:
		return frame{}, partial
	case whole:
		i := indexEOL(rest)
		if i < 0 {
			return frame{}, d.unlessTooLong(rest)
		}
		if i == len(eventPrefix) || rest[i] != '\n' || i > d.max {
			return frame{}, other // no name: a Writer sends none
		}
		name, body = rest[len(eventPrefix):i], rest[i+1:]
	}
	if w := starts(body, dataPrefix); w != whole {
		return frame{}, w
	}
	j := indexEOL(body)
	switch {
	case j < 0:
		return frame{}, d.unlessTooLong(rest)
	case j > d.max || body[j] != '\n':
		return frame{}, other
	case j+1 == len(body):
		return frame{}, partial // the blank line is still to come
	case body[j+1] != '\n':
		return frame{}, other
	}
	return frame{name: name, data: body[len(dataPrefix):j], size: len(rest) - len(body) + j + 2}, whole
}

// starts says whether b starts with prefix (whole), may still (partial:
// b is shorter and a prefix of it) or does not (other).
func starts(b, prefix []byte) wholeness {
	switch {
	case bytes.HasPrefix(b, prefix):
		return whole
	case len(b) < len(prefix) && bytes.HasPrefix(prefix, b):
		return partial
	}
	return other
}

// unlessTooLong is partial for an unfinished line the decoder may still
// read, other for one past its limit (the line-by-line path reports it).
func (d *Decoder) unlessTooLong(rest []byte) wholeness {
	if len(rest) > d.max {
		return other
	}
	return partial
}
