package jsonscan

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit, kept so that Valid and
// json.Valid agree.
const maxDepth = 10000

// Valid reports whether b is one JSON value, as encoding/json.Valid does.
func Valid(b []byte) bool {
	s := scanner{b: b}
	s.space()
	return s.value(0) && s.end()
}

// Match is what [Find] found of the top-level members that may have the
// name it looks for.
type Match struct {
	// Count is how many there are: those whose key is the name in any
	// case (encoding/json decodes each into the same field), and those
	// whose key has an escape, which only encoding/json can decode.
	Count int
	// Escaped says one key had an escape.
	Escaped bool
	// Value is the last one's value (nil when there is none).
	Value []byte
}

// Find checks that b is one JSON value (valid) and finds the members of
// its top-level object that may have the key key, a plain key token,
// quotes included (`"usage"`), in one pass: what the relay reads of a
// response (its usage) without decoding the rest.
func Find(b, key []byte) (m Match, valid bool) {
	s := scanner{b: b, find: key}
	s.space()
	valid = s.value(0) && s.end()
	return s.match, valid
}

// scanner is one pass over b; i is the next byte to read. Its methods
// only check: what a caller sees of b it sees through an [Iter].
type scanner struct {
	b []byte
	i int
	// escaped says the last string read had an escape.
	escaped bool
	// find is the key token Find looks for, and match what it found.
	find  []byte
	match Match
	// spans, when set, records the plain strings among the values.
	spans *Repeat
}

// end reports whether nothing but space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.stringValue()
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

func (s *scanner) object(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.key()
		if !ok {
			return false
		}
		if depth == 1 && s.find != nil && s.matches(key) {
			ok = s.member(depth)
		} else {
			ok = s.value(depth)
		}
		if !ok {
			return false
		}
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
}

// matches reports whether key (just read) may name the member Find
// looks for: it does in any case, Unicode folding included (encoding/json
// matches "uſage" to usage, whose length differs), and an escaped key
// may.
func (s *scanner) matches(key []byte) bool {
	if s.escaped {
		return true
	}
	// An exact filter first, for the other keys of every chunk: a key
	// that folds to find starts with find's first letter in either case
	// or with the first byte of a non-ASCII letter.
	if c := key[1]; len(s.find) > 1 && c|0x20 != s.find[1]|0x20 && c < utf8.RuneSelf {
		return false
	}
	return bytes.EqualFold(key, s.find)
}

// member reads the value of a member Find looks for, and records it.
func (s *scanner) member(depth int) bool {
	s.match.Count++
	s.match.Escaped = s.match.Escaped || s.escaped
	start := s.i
	if !s.value(depth) {
		return false
	}
	s.match.Value = s.b[start:s.i]
	return true
}

func (s *scanner) array(depth int) bool {
	if depth > maxDepth {
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

// stringValue reads a string that is a value (not a key), and records
// its content for a Repeat when it has no escape.
func (s *scanner) stringValue() bool {
	start := s.i
	if !s.str() {
		return false
	}
	if s.spans != nil && !s.escaped {
		s.spans.record(start+1, s.i-1)
	}
	return true
}

// key reads a member's key, its colon and the space after it, and
// returns the key's token.
func (s *scanner) key() ([]byte, bool) {
	start := s.i
	if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
		return nil, false
	}
	key := s.b[start:s.i]
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return nil, false
	}
	s.i++
	s.space()
	return key, true
}

// next reads what follows a member or element: a comma (more: another
// follows) or the closing byte (the end); ok is false for anything else.
func (s *scanner) next(closing byte) (more, ok bool) {
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

// str reads a string token, from its opening quote to past its closing
// one.
func (s *scanner) str() bool {
	b := s.b
	s.escaped = false
	for i := s.i + 1; ; {
		short := min(i+16, len(b))
		for i < short && !special[b[i]] {
			i++
		}
		if i == short {
			i = longRun(b, i)
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return true
		case '\\':
			s.i, s.escaped = i, true
			if !s.escape() {
				return false
			}
			i = s.i
		default: // a control byte
			return false
		}
	}
}

// longRun returns the index of the first special byte of b at or after
// i, or len(b), reading 8 bytes at a time: str calls it for a run longer
// than a key or a token (a prompt's text).
func longRun(b []byte, i int) int {
	for i+8 <= len(b) && !anySpecial(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	for ; i < len(b); i++ {
		if special[b[i]] {
			return i
		}
	}
	return i
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

// anySpecial reports whether any of the 8 bytes in x is special: a
// quote, a backslash or a control byte (the classic tests for a zero
// byte and for a byte less than n, exact as to whether there is one).
func anySpecial(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((quote-ones)&^quote|(backslash-ones)&^backslash|(x-ones*0x20)&^x)&highs != 0
}

func (s *scanner) escape() bool {
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

func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() bool {
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

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}
