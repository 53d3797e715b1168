package consume

import (
	"bytes"
	"encoding/json"

	"github.com/pacegate/pacegate/consume/jsonscan"
)

// Scan is the relay's one pass over a streamed event's data: it checks
// that data is one JSON value (exactly what encoding/json.Valid accepts)
// and reads what it says of usage, as [Tally.Read] would. A chunk
// without a top-level "usage" member is read in that pass alone; of the
// usage chunk only the usage member is decoded (see [usageMember]).
func (t *Tally) Scan(name string, data []byte) (r Reading, valid bool) {
	m, valid := t.findUsage(data)
	if !valid {
		return Reading{}, false
	}
	if t.Shape != ShapeOpenAI {
		return t.Read(EventChunk, name, data), true
	}
	if !mayHaveUsage(m) {
		t.Streamed++
		return Reading{Read: true, Token: true}, true
	}
	if u, ok := usageMember(data, m); ok {
		t.Usage, t.Known, t.Final = u, true, u.Only
		return Reading{Read: true, Reported: true, Usage: u, Final: u.Only}, true
	}
	return t.Read(EventChunk, name, data), true
}

// findUsage is jsonscan.Find of data's usage, through Repeats when set.
func (t *Tally) findUsage(data []byte) (jsonscan.Match, bool) {
	if t.Repeats != nil {
		return t.Repeats.Find(data, quotedUsage)
	}
	return jsonscan.Find(data, quotedUsage)
}

var (
	quotedUsage   = []byte(`"usage"`)
	quotedChoices = []byte(`"choices"`)
	nullLiteral   = []byte("null")
)

// scanJSON reports whether b is one JSON value (as json.Valid says) and
// whether it may have a top-level usage (see mayHaveUsage).
func scanJSON(b []byte) (valid, usage bool) {
	m, valid := jsonscan.Find(b, quotedUsage)
	return valid, mayHaveUsage(m)
}

// mayHaveUsage says whether what Find found of a top-level usage may be
// one: a member named usage in any case (as encoding/json matches names)
// that is not null, or several candidates, or an escaped key, which Read
// decides.
func mayHaveUsage(m jsonscan.Match) bool {
	return m.Count > 1 || m.Escaped || (m.Count == 1 && !bytes.Equal(m.Value, nullLiteral))
}

// usageMember is ParseUsage of a valid chunk whose one usage member m
// found, without decoding the rest of it: a second scan finds its
// choices, which are empty or not, and the usage member is read by
// readChunkUsage, or by encoding/json where that cannot. ok is false
// where only ParseUsage can tell (several choices or usage candidates,
// escaped keys, a value of the wrong type); the caller then asks it.
func usageMember(data []byte, m jsonscan.Match) (u Usage, ok bool) {
	if m.Count != 1 || m.Escaped || !bytes.Contains(data, usageKey) {
		return Usage{}, false
	}
	c, _ := jsonscan.Find(data, quotedChoices)
	if c.Count > 1 || c.Escaped {
		return Usage{}, false
	}
	only, ok := noElements(c.Value)
	if !ok {
		return Usage{}, false
	}
	if u, ok := readChunkUsage(m.Value, only); ok {
		return u, true
	}
	var w *chunkUsage
	if json.Unmarshal(m.Value, &w) != nil || w == nil {
		return Usage{}, false
	}
	return w.normal(only), true
}

// noElements says whether a choices value decodes to no elements (absent,
// null or []); ok is false when it is not an array at all.
func noElements(v []byte) (empty, ok bool) {
	switch {
	case v == nil || bytes.Equal(v, nullLiteral):
		return true, true
	case v[0] != '[':
		return false, false
	}
	return len(bytes.TrimLeft(v[1:], " \t\r\n")) == 1, true
}

// ScanBody is Scan for a non-streamed body (what [Tally.Read] reads of
// an EventBody): one pass checks that data is one JSON value and finds
// its top-level usage member, and only that member is decoded, where
// Body decodes the whole body (a long answer's every byte) a second
// time.
func (t *Tally) ScanBody(data []byte) (r Reading, valid bool) {
	m, valid := jsonscan.Find(data, quotedUsage)
	if !valid {
		return Reading{}, false
	}
	r = Reading{Read: true, Reported: t.bodyUsage(data, m)}
	if r.Reported {
		r.Usage, r.Final = t.Usage, t.Final
	}
	return r, true
}

// bodyUsage is Body from what the scan found of data's usage: it decodes the usage
// member alone when there is exactly one, and leaves a doubtful body
// (several candidates, which encoding/json merges, or an escaped key)
// to Body.
func (t *Tally) bodyUsage(data []byte, m jsonscan.Match) bool {
	switch {
	case m.Count == 0 || !bytes.Contains(data, usageKey):
		return false
	case m.Count > 1 || m.Escaped:
		return t.Body(data)
	case bytes.Equal(m.Value, nullLiteral): // "usage": null
		return false
	}
	var w wireUsage
	if json.Unmarshal(m.Value, &w) != nil {
		return false
	}
	t.Usage, t.Known, t.Final = w.normal(), true, true
	return true
}
