package jsonscan

// Iter steps through the top level of a JSON value, checking it as it
// goes: the members of an object ([Members]) or the elements of an
// array ([Elements]).
//
//	it := jsonscan.Members(body)
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if !it.Valid() || !it.Found() { ... }
//
// Next returns each one as soon as it is scanned, before the rest of
// the input is checked: act on what it returned only once Valid is true.
// Key and Value alias the input. An Iter is a value that allocates
// nothing; it is not safe for concurrent use.
type Iter struct {
	s           scanner
	open, close byte
	state       iterState
	found       bool // the top-level value is the container asked for
	valid       bool // set when done
	key, value  []byte
	keyEscaped  bool
}

type iterState uint8

const (
	iterStart iterState = iota
	iterInside
	iterDone
)

// Members steps through the members of b's top-level object.
func Members(b []byte) Iter { return Iter{s: scanner{b: b}, open: '{', close: '}'} }

// Elements steps through the elements of b's top-level array.
func Elements(b []byte) Iter { return Iter{s: scanner{b: b}, open: '[', close: ']'} }

// Next scans the next member or element and reports whether there was
// one. At the end, or at the first byte that is not JSON, it returns
// false and Valid says which. When the top-level value is not the
// container asked for, the first Next checks it whole and returns false.
func (it *Iter) Next() bool {
	s := &it.s
	switch it.state {
	case iterStart:
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != it.open {
			return it.finish(s.value(0))
		}
		it.found = true
		s.i++
		s.space()
		if s.i < len(s.b) && s.b[s.i] == it.close {
			s.i++
			return it.finish(true)
		}
		it.state = iterInside
		return it.item()
	case iterInside:
		more, ok := s.next(it.close)
		if !more {
			return it.finish(ok)
		}
		return it.item()
	}
	return false
}

// item scans one member or element.
func (it *Iter) item() bool {
	s := &it.s
	if it.open == '{' {
		key, ok := s.key()
		if !ok {
			return it.finish(false)
		}
		it.key, it.keyEscaped = key, s.escaped
	}
	start := s.i
	if !s.value(1) {
		return it.finish(false)
	}
	it.value = s.b[start:s.i]
	return true
}

// finish ends the walk: the input is valid when what was scanned is and
// nothing but space follows it.
func (it *Iter) finish(ok bool) bool {
	it.state, it.key, it.value = iterDone, nil, nil
	it.valid = ok && it.s.end()
	return false
}

// Key is the current member's key: its string token, quotes and escapes
// as written ([String] decodes it). Nil for an element.
func (it *Iter) Key() []byte { return it.key }

// KeyEscaped reports whether the current member's key has an escape,
// so that its bytes are not its text.
func (it *Iter) KeyEscaped() bool { return it.keyEscaped }

// Value is the current member's or element's value, from its first byte
// to its last.
func (it *Iter) Value() []byte { return it.value }

// Valid reports, once Next has returned false, whether the input is one
// JSON value (as encoding/json.Valid says).
func (it *Iter) Valid() bool { return it.state == iterDone && it.valid }

// Found reports whether the top-level value is the container asked for:
// an object for Members, an array for Elements.
func (it *Iter) Found() bool { return it.found }
