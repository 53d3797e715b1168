package gateway

import (
	"slices"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume/upstream/prefix"
)

// chainOf is the chain of a message list, written by writeMessages.
func chainOf(raw string, maxBytes int) prefix.Chain {
	b := prefix.NewBuilder("m", maxBytes)
	writeMessages(b, []byte(raw))
	return b.Chain()
}

// decodedChainOf is the chain of a message list decoded by encoding/json
// alone: what writeMessages wrote before it scanned.
func decodedChainOf(raw string, maxBytes int) prefix.Chain {
	b := prefix.NewBuilder("m", maxBytes)
	msgs, ok := decodeMessages([]byte(raw))
	if !ok {
		b.Write([]byte(raw))
		return b.Chain()
	}
	w := newMessageWriter(b, []byte(raw))
	for _, m := range msgs {
		w.write(m)
	}
	return b.Chain()
}

// A list the scanner leaves to encoding/json is rendered as encoding/json
// reads it, whatever the scanner wrote before it gave up: a key in
// another case is the field, null leaves a string field alone, and a
// field of the wrong type makes the list raw text.
func TestWriteMessagesReadsListsAsEncodingJSONDoes(t *testing.T) {
	system := `{"role":"system","content":"` + longSystem + `"}`
	for _, c := range []struct{ odd, same string }{
		{`[` + system + `,{"ROLE":"user","content":"hi"}]`, `[` + system + `,{"role":"user","content":"hi"}]`},
		{`[` + system + `,{"role":"user","role":null,"content":"hi"}]`, `[` + system + `,{"role":"user","content":"hi"}]`},
		{`[` + system + `,{"r\u006fle":"user","content":"hi"}]`, `[` + system + `,{"role":"user","content":"hi"}]`},
		{`[` + system + `,{"role":"us\u0065r","content":"hi"}]`, `[` + system + `,{"role":"user","content":"hi"}]`},
		{`[` + system + `,null]`, `[` + system + `,{"type":""}]`},
	} {
		odd, same := chainOf(c.odd, 1<<16), chainOf(c.same, 1<<16)
		if !slices.Equal(odd.Hashes, same.Hashes) || len(odd.Hashes) < 4 {
			t.Errorf("%s\nrenders unlike\n%s", c.odd[len(system)+1:], c.same[len(system)+1:])
		}
	}
	wrongType := `[` + system + `,{"role":5,"content":"hi"}]`
	raw := prefix.NewBuilder("m", 1<<16)
	raw.WriteString(wrongType)
	if got := chainOf(wrongType, 1<<16); !slices.Equal(got.Hashes, raw.Chain().Hashes) {
		t.Error("a list with a role of the wrong type is not rendered as raw text")
	}
}

// FuzzWriteMessages: writeMessages renders every list as encoding/json's
// decode of it renders, with room for all of it and with room for a
// block only.
func FuzzWriteMessages(f *testing.F) {
	f.Add(`[{"role":"system","content":"` + longSystem + `"},{"role":"user","content":[{"type":"text","text":"hi"}]}]`)
	f.Add(`[{"type":"function_call","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","output":"42"}]`)
	f.Add(`[{"Role":"user","content":null,"ARGUMENTS":"x","output":null},null,{"role":"a","role":null}]`)
	f.Add(`"just a string"`)
	f.Add(`[{"role":"` + strings.Repeat("é", 200) + `","content":"\ud800"}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		for _, maxBytes := range []int{1 << 16, prefix.BlockBytes} {
			got, want := chainOf(raw, maxBytes), decodedChainOf(raw, maxBytes)
			if got.Bytes != want.Bytes || !slices.Equal(got.Hashes, want.Hashes) {
				t.Fatalf("writeMessages(%q) with room for %d: %d bytes %x; encoding/json's: %d bytes %x",
					raw, maxBytes, got.Bytes, got.Hashes, want.Bytes, want.Hashes)
			}
		}
	})
}
