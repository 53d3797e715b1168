package consume

import (
	"bytes"
	"encoding/json"
)

// Scan is the relay's one pass over a streamed event's data: it checks
// that data is one JSON value (exactly what encoding/json.Valid accepts)
// and reads what it says of usage, as [Tally.Read] would. A chunk
// without a top-level "usage" member is read in that pass alone; only
// the usage chunk is decoded.
func (t *Tally) Scan(name string, data []byte) (r Reading, valid bool) {
	valid, usage := scanJSON(data)
	if !valid {
		return Reading{}, false
	}
	if t.Shape == ShapeOpenAI && !usage {
		t.Streamed++
		return Reading{Read: true, Token: true}, true
	}
	return t.Read(EventChunk, name, data), true
}

// maxScanDepth is encoding/json's nesting limit, kept so that Scan and
// json.Valid agree.
const maxScanDepth = 10000

// jsonScanner validates JSON in one pass without allocating. usage
// records a top-level object member named "usage" (any case, as
// encoding/json matches field names, or escaped) whose value is not
// null.
type jsonScanner struct {
	b     []byte
	i     int
	usage bool
	// members counts the top-level members that may be "usage" (null
	// ones too); member is the value of the last one (nil when it is
	// null), and escaped says one such key had an escape, which only
	// encoding/json can match exactly.
	members int
	member  []byte
	escaped bool
}

// scanJSON reports whether b is one JSON value (RFC 8259; like
// json.Valid, it does not check UTF-8) and whether it is an object with
// a non-null top-level "usage" member.
func scanJSON(b []byte) (valid, usage bool) {
	s := jsonScanner{b: b}
	return s.whole(), s.usage
}

// whole scans s.b and reports whether it is one JSON value.
func (s *jsonScanner) whole() bool {
	s.space()
	if !s.value(0) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// ScanBody is Scan for a non-streamed body (what [Tally.Read] reads of
// an EventBody): one pass checks that data is one JSON value and finds
// its top-level usage member, and only that member is decoded, where
// Body decodes the whole body (a long answer's every byte) a second
// time.
func (t *Tally) ScanBody(data []byte) (r Reading, valid bool) {
	s := jsonScanner{b: data}
	if !s.whole() {
		return Reading{}, false
	}
	r = Reading{Read: true, Reported: t.bodyUsage(data, &s)}
	if r.Reported {
		r.Usage, r.Final = t.Usage, t.Final
	}
	return r, true
}

// bodyUsage is Body from what s found in data: it decodes the usage
// member alone when there is exactly one, and leaves a doubtful body
// (several candidates, which encoding/json merges, or an escaped key)
// to Body.
func (t *Tally) bodyUsage(data []byte, s *jsonScanner) bool {
	switch {
	case s.members == 0 || !bytes.Contains(data, usageKey):
		return false
	case s.members > 1 || s.escaped:
		return t.Body(data)
	case s.member == nil: // "usage": null
		return false
	}
	var u wireUsage
	if json.Unmarshal(s.member, &u) != nil {
		return false
	}
	t.Usage, t.Known, t.Final = u.normal(), true, true
	return true
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *jsonScanner) object(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		key, ok := s.str()
		if !ok {
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		// A key with an escape is taken for usage too: encoding/json
		// would unescape it, and Read then decides exactly.
		escaped := bytes.IndexByte(key, '\\') >= 0
		if depth == 1 && (escaped || bytes.EqualFold(key, usageName)) {
			if !s.usageMember(depth, escaped) {
				return false
			}
		} else if !s.value(depth) {
			return false
		}
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
}

// usageMember reads the value of a top-level member that may be
// "usage" and records it.
func (s *jsonScanner) usageMember(depth int, escaped bool) bool {
	s.members++
	s.escaped = s.escaped || escaped
	null := bytes.HasPrefix(s.b[s.i:], nullLiteral)
	s.usage = s.usage || !null
	start := s.i
	if !s.value(depth) {
		return false
	}
	if s.member = nil; !null {
		s.member = s.b[start:s.i]
	}
	return true
}

var (
	usageName   = []byte("usage")
	nullLiteral = []byte("null")
)

func (s *jsonScanner) array(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		if more, ok := s.next(']'); !more {
			return ok
		}
	}
}

// next reads what follows a member or element: a comma (more: another
// follows) or the closing byte (the end); ok is false for anything else.
func (s *jsonScanner) next(closing byte) (more, ok bool) {
	s.space()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.space()
		return true, true
	case closing:
		s.i++
		return false, true
	}
	return false, false
}

// str reads a string and returns its raw bytes between the quotes.
func (s *jsonScanner) str() ([]byte, bool) {
	b := s.b
	start := s.i + 1 // past the quote
	for i := start; i < len(b); {
		c := b[i]
		if !special[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.i = i + 1
			return b[start:i], true
		case c == '\\':
			s.i = i
			if !s.escape() {
				return nil, false
			}
			i = s.i
		default: // a control byte
			return nil, false
		}
	}
	return nil, false
}

// special marks the bytes that end a string's plain run: the quote, the
// backslash and the control bytes.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func (s *jsonScanner) escape() bool {
	s.i++ // backslash
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return true
	case 'u':
		if s.i+4 >= len(s.b) {
			return false
		}
		for _, h := range s.b[s.i+1 : s.i+5] {
			if !isHex(h) {
				return false
			}
		}
		s.i += 5
		return true
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *jsonScanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *jsonScanner) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *jsonScanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}
