package consume

import (
	"bytes"
	"encoding/json"

	"github.com/pacegate/pacegate/consume/jsonscan"
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

var (
	quotedUsage = []byte(`"usage"`)
	nullLiteral = []byte("null")
)

// scanJSON reports whether b is one JSON value (as json.Valid says) and
// whether it may have a top-level usage: a member named usage in any
// case (as encoding/json matches names) that is not null, or several
// candidates, or an escaped key, which Read decides.
func scanJSON(b []byte) (valid, usage bool) {
	m, valid := jsonscan.Find(b, quotedUsage)
	return valid, m.Count > 1 || m.Escaped || (m.Count == 1 && !bytes.Equal(m.Value, nullLiteral))
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
