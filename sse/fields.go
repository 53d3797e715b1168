package sse

import (
	"bytes"
	"strconv"
	"time"
)

var bom = []byte("\xEF\xBB\xBF")

// process interprets one line and reports whether it completed an event
// (or a comment to surface).
func (d *Decoder) process(line []byte) (Event, bool) {
	if !d.started {
		d.started = true
		line = bytes.TrimPrefix(line, bom)
	}
	if len(line) == 0 {
		return d.dispatch()
	}
	if line[0] == ':' {
		if !d.comments {
			return Event{}, false
		}
		return Event{Comment: true, Data: trimSpace1(line[1:])}, true
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], trimSpace1(line[i+1:])
	}
	d.dirty = true
	switch string(field) {
	case "data":
		d.data = append(d.data, value...)
		d.data = append(d.data, '\n')
		d.hasData = true
	case "event":
		d.event = reuse(d.lastEvent, value)
		d.lastEvent = d.event
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.id = reuse(d.id, value)
		}
	case "retry":
		if ms, ok := parseRetry(value); ok {
			d.retry = ms
		}
	}
	return Event{}, false
}

// dispatch ends the current event at a blank line. An event without data
// is dropped, as browsers do.
func (d *Decoder) dispatch() (Event, bool) {
	d.dirty = false
	event := d.event
	d.event = ""
	if !d.hasData {
		return Event{}, false
	}
	ev := Event{ID: d.id, Event: event, Retry: d.retry}
	ev.Data = d.data[:len(d.data)-1]
	d.data, d.hasData = d.data[:0], false
	return ev, true
}

// reuse returns last when it spells b, else a new string: a stream
// repeats its event names and ids, so most events cost no allocation.
func reuse(last string, b []byte) string {
	if string(b) == last {
		return last
	}
	return string(b)
}

// trimSpace1 strips exactly one leading space: "data:  x" keeps " x".
func trimSpace1(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}

// parseRetry accepts ASCII digits only, as the specification requires.
func parseRetry(b []byte) (time.Duration, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
