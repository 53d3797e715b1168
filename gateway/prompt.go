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

// message is what routing reads of a message or input item: its role
// and content, or for a Responses item without them (a tool call or its
// output) what the model reads of it.
type message struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// writeMessages renders a list of messages as role and content each (a
// tool call as its type, name, arguments and output), and anything but a
// list of objects (a string input) as it came. It stops at the first
// item the builder has no room for; the rest is only measured.
func writeMessages(b *prefix.Builder, raw json.RawMessage) {
	var msgs []message
	if json.Unmarshal(raw, &msgs) != nil {
		b.Write(raw)
		return
	}
	start := b.Chain().Bytes
	for _, m := range msgs {
		if b.Full() {
			b.Skip(len(raw) - (b.Chain().Bytes - start))
			return
		}
		if m.Role == "" && m.Content == nil {
			b.WriteString(m.Type)
			b.WriteString(":")
			b.WriteString(m.Name)
			b.WriteString(m.Arguments)
			b.Write(m.Output)
		} else {
			b.WriteString(m.Role)
			b.WriteString(":")
			b.Write(m.Content)
		}
		b.WriteString("\n")
	}
}
