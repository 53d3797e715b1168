package gateway

import (
	"encoding/json"

	"github.com/pacegate/pacegate/consume/upstream/prefix"
)

// promptPart is one field of a request's prompt, in the order the model
// reads it; messages says it is a list of messages (or input items),
// rendered as each one's role and content, so that two clients that
// write the same conversation with different field order or spacing
// render it alike.
type promptPart struct {
	field    string
	messages bool
}

// The prompts of the generation routes, in the order the model reads
// them: what the prefix of a conversation's next turn shares with the
// last one.
var (
	chatPrompt       = []promptPart{{field: "tools"}, {field: "messages", messages: true}}
	completionPrompt = []promptPart{{field: "prompt"}}
	responsesPrompt  = []promptPart{{field: "instructions"}, {field: "tools"}, {field: "input", messages: true}}
	messagesPrompt   = []promptPart{{field: "system"}, {field: "tools"}, {field: "messages", messages: true}}
)

// promptChain renders the prompt parts of fields for model and hashes
// its first maxBytes bytes (see package prefix). The work is bounded by
// maxBytes, whatever the prompt's size: past it the rest is only
// measured.
func promptChain(parts []promptPart, fields map[string]json.RawMessage, model string, maxBytes int) prefix.Chain {
	b := prefix.NewBuilder(model, maxBytes)
	for _, part := range parts {
		raw, ok := fields[part.field]
		switch {
		case !ok || isNull(raw):
		case part.messages:
			writeMessages(b, raw)
		default:
			b.Write(raw)
		}
	}
	return b.Chain()
}

// message is what routing reads of a message or input item, as the
// text it renders: its role and content, or for a Responses item without
// them (a tool call or its output) its type, name, arguments and output.
// Strings are decoded; content and output are their JSON as it came.
type message struct {
	role, content, kind, name, arguments, output []byte
}

// writeMessages renders a list of messages as role and content each (a
// tool call as its type, name, arguments and output), and anything but a
// list of objects (a string input) as it came. It stops at the first
// item the builder has no room for; the rest is only measured. The list
// is read in one pass of the JSON scanner as it is written; a list the
// scanner leaves to encoding/json (see scanMessage) is written again
// from encoding/json's decode.
func writeMessages(b *prefix.Builder, raw json.RawMessage) {
	saved := b.Save()
	if writeScanned(b, raw) {
		return
	}
	b.Restore(saved)
	msgs, ok := decodeMessages(raw)
	if !ok {
		b.Write(raw)
		return
	}
	w := newMessageWriter(b, raw)
	for _, m := range msgs {
		w.write(m)
	}
}

// messageWriter writes a list's messages one by one until the builder
// is full, then measures the rest of the list.
type messageWriter struct {
	b            *prefix.Builder
	start, total int
	full         bool
}

func newMessageWriter(b *prefix.Builder, raw []byte) messageWriter {
	return messageWriter{b: b, start: b.Chain().Bytes, total: len(raw)}
}

func (w *messageWriter) write(m message) {
	b := w.b
	if w.full {
		return
	}
	if w.full = b.Full(); w.full {
		b.Skip(w.total - (b.Chain().Bytes - w.start))
		return
	}
	if len(m.role) == 0 && m.content == nil {
		b.Write(m.kind)
		b.WriteString(":")
		b.Write(m.name)
		b.Write(m.arguments)
		b.Write(m.output)
	} else {
		b.Write(m.role)
		b.WriteString(":")
		b.Write(m.content)
	}
	b.WriteString("\n")
}
