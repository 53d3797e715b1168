package jsonscan

import "encoding/binary"

// maxSpans is how many of a value's strings a Repeat keeps: a stream's
// chunk has about six (its id, object, model, role or text, ...).
const maxSpans = 16

// Repeat is [Find] for a sequence of values most of which repeat the
// one before but for the text inside one string, as a stream's chunks
// do (all but the token's text is the same from chunk to chunk). It
// keeps a copy of the last value it passed over and found valid without
// a usage candidate, and where that value's plain strings (no escape)
// lie. A value that differs from it only inside one of those strings, by
// bytes that need no escape, is then known valid, with the same members,
// without a pass over it: the two differ in what one string says and in
// nothing JSON sees. Anything else gets Find's pass, and becomes the
// value kept.
//
// The zero Repeat is ready; it is not safe for concurrent use. Start
// gives it room for the first values, so that it need not allocate.
type Repeat struct {
	last  []byte // the kept value; nil: none
	n     int    // spans used; ahead of them: a value reads it, then the first few
	spans [maxSpans]span
}

// span is a plain string's content: last[start:end].
type span struct{ start, end int }

// Start gives r the room buf (reused from its start) for the values it
// keeps.
func (r *Repeat) Start(buf []byte) { *r = Repeat{last: buf[:0:len(buf)]} }

// Find is [Find] of b for key, through what r kept of the value before.
func (r *Repeat) Find(b, key []byte) (m Match, valid bool) {
	if r.last != nil && r.repeats(b) {
		return Match{}, true
	}
	s := scanner{b: b, find: key, spans: r}
	r.n = 0
	s.space()
	valid = s.value(0) && s.end()
	if !valid || s.match.Count > 0 {
		r.last = r.last[:0]
		r.n = 0
		return s.match, valid
	}
	r.last = append(r.last[:0], b...)
	return s.match, true
}

// repeats reports whether b differs from the kept value only inside one
// of its plain strings, by plain bytes. The kept value stays: the next
// one is compared with it too, which spares a copy of each.
func (r *Repeat) repeats(b []byte) bool {
	old := r.last
	if len(old) == 0 {
		return false
	}
	p := commonPrefix(old, b)
	if p == len(old) && p == len(b) {
		return true // the same bytes
	}
	q := commonSuffix(old[p:], b[p:])
	delta := len(b) - len(old)
	oldEnd := len(old) - q // the differing bytes: old[p:oldEnd], b[p:oldEnd+delta]
	return r.inSpan(p, oldEnd) && plain(b[p:oldEnd+delta])
}

// inSpan reports whether one kept span holds last[from:to], its ends
// included.
func (r *Repeat) inSpan(from, to int) bool {
	for _, sp := range r.spans[:r.n] {
		if sp.start <= from && to <= sp.end {
			return true
		}
	}
	return false
}

// record keeps a string value's content, b[start:end], when it has no
// escape and there is room.
func (r *Repeat) record(start, end int) {
	if r.n < maxSpans {
		r.spans[r.n] = span{start, end}
		r.n++
	}
}

// plain reports whether b needs no escape in a JSON string.
func plain(b []byte) bool {
	return longRun(b, 0) == len(b)
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b.
func commonSuffix(a, b []byte) int {
	la, lb, n := len(a), len(b), min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[la-i-8:]) == binary.LittleEndian.Uint64(b[lb-i-8:]) {
		i += 8
	}
	for i < n && a[la-i-1] == b[lb-i-1] {
		i++
	}
	return i
}
