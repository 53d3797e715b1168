package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/pacegate/pacegate/consume/jsonscan"
	"github.com/pacegate/pacegate/consume/upstream/prefix"
)

// writeScanned writes a list of messages read in one pass of the JSON
// scanner, and reports false, having written part of it, for a list it
// does not read exactly as decodeMessages does: an item that is not an
// object, a key that is escaped or in another case, a string field that
// is not a string. Items past the builder's room are still checked.
func writeScanned(b *prefix.Builder, raw []byte) bool {
	w := newMessageWriter(b, raw)
	it := jsonscan.Elements(raw)
	for it.Next() {
		m, ok := scanMessage(it.Value())
		if !ok {
			return false
		}
		w.write(m)
	}
	return it.Valid() && it.Found()
}

// scanMessage reads one item; ok is false for anything it leaves to
// encoding/json.
func scanMessage(item []byte) (m message, ok bool) {
	if len(item) == 0 || item[0] != '{' {
		return message{}, false
	}
	it := jsonscan.Members(item)
	for ok = true; ok && it.Next(); {
		if it.KeyEscaped() {
			return message{}, false
		}
		ok = m.set(it.Key(), it.Value())
	}
	return m, ok && it.Valid()
}

// set stores one member. A string field keeps its value on null, as
// encoding/json leaves a string alone on null; content and output take
// any JSON, null too.
func (m *message) set(key, value []byte) bool {
	switch string(key) {
	case `"role"`:
		return setText(&m.role, value)
	case `"content"`:
		m.content = value
	case `"type"`:
		return setText(&m.kind, value)
	case `"name"`:
		return setText(&m.name, value)
	case `"arguments"`:
		return setText(&m.arguments, value)
	case `"output"`:
		m.output = value
	default:
		return !foldsToField(key[1 : len(key)-1])
	}
	return true
}

func setText(dst *[]byte, value []byte) bool {
	if string(value) == "null" {
		return true
	}
	text, ok := jsonscan.Text(value)
	*dst = text
	return ok
}

// messageFields are the keys wireMessage decodes; encoding/json matches
// them in any case (Unicode folding), which scanMessage leaves to it.
var messageFields = [][]byte{[]byte("role"), []byte("content"), []byte("type"), []byte("name"), []byte("arguments"), []byte("output")}

func foldsToField(key []byte) bool {
	for _, f := range messageFields {
		if bytes.EqualFold(key, f) {
			return true
		}
	}
	return false
}

// wireMessage is message as encoding/json decodes it.
type wireMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// decodeMessages reads a list of messages with encoding/json: what
// writeScanned refuses.
func decodeMessages(raw []byte) ([]message, bool) {
	var wire []wireMessage
	if json.Unmarshal(raw, &wire) != nil {
		return nil, false
	}
	msgs := make([]message, len(wire))
	for i, w := range wire {
		msgs[i] = message{role: []byte(w.Role), content: w.Content, kind: []byte(w.Type),
			name: []byte(w.Name), arguments: []byte(w.Arguments), output: w.Output}
	}
	return msgs, true
}
