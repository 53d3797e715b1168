package gateway

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume/upstream/prefix"
)

func fieldsOf(t testing.TB, body string) map[string]json.RawMessage {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

var longSystem = strings.Repeat("You are a careful assistant. ", 40) // 1,160 bytes: four full blocks

func TestPromptChainOfAConversationGrowsByItsNewTurns(t *testing.T) {
	turn1 := `{"model":"m","messages":[{"role":"system","content":"` + longSystem + `"},{"role":"user","content":"first"}]}`
	// The next turn, written by another client: other field order and
	// spacing, the same messages.
	turn2 := `{"messages": [ {"content":"` + longSystem + `", "role":"system"}, {"content":"first","role":"user"},
		{"role":"assistant","content":"an answer"}, {"role":"user","content":"second"}], "model":"m"}`
	a := promptChain(chatPrompt, fieldsOf(t, turn1), "m", 1<<16)
	b := promptChain(chatPrompt, fieldsOf(t, turn2), "m", 1<<16)
	if len(a.Hashes) != 4 || !slices.Equal(b.Hashes[:len(a.Hashes)], a.Hashes) {
		t.Fatalf("turn 1 has %d blocks; turn 2 does not start with them: %x / %x", len(a.Hashes), a.Hashes, b.Hashes)
	}
	other := promptChain(chatPrompt, fieldsOf(t, strings.Replace(turn1, "careful", "helpful", 1)), "m", 1<<16)
	if other.Hashes[0] == a.Hashes[0] {
		t.Fatal("another system prompt has the same first block hash")
	}
	withTools := promptChain(chatPrompt, fieldsOf(t, strings.Replace(turn1, `{"model":"m",`, `{"model":"m","tools":[{"type":"function"}],`, 1)), "m", 1<<16)
	if withTools.Hashes[0] == a.Hashes[0] {
		t.Fatal("tools are not part of the prompt")
	}
}

func TestPromptChainPerRoute(t *testing.T) {
	cases := []struct {
		parts []promptPart
		body  string
	}{
		{completionPrompt, `{"model":"m","prompt":"` + longSystem + `"}`},
		{responsesPrompt, `{"model":"m","instructions":"` + longSystem + `","input":"hi"}`},
		{responsesPrompt, `{"model":"m","input":[{"role":"developer","content":"` + longSystem + `"},{"type":"function_call_output","call_id":"c","output":"42"}]}`},
		{messagesPrompt, `{"model":"m","system":"` + longSystem + `","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
	}
	for _, tc := range cases {
		c := promptChain(tc.parts, fieldsOf(t, tc.body), "m", 1<<16)
		if len(c.Hashes) < 4 || c.Bytes < len(longSystem) {
			t.Errorf("%s: %d blocks of %d bytes; want the long prompt hashed", tc.body[:40], len(c.Hashes), c.Bytes)
		}
	}
}

// A huge prompt, thousands of messages or binary garbage cost bounded
// hashing work: at most max_prefix_bytes are hashed, the rest measured.
func TestPromptChainIsBoundedOnHostileInput(t *testing.T) {
	huge := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 4<<20) + `"}]}`
	many := `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"hello there"},`, 20000) + `{"role":"user","content":"end"}]}`
	garbage := `{"model":"m","messages":[{"role":"\u0000\u00ff","content":"\ud800\u0001` + strings.Repeat(`\u0000`, 3000) + `"},7,null,[1,{}],"s"]}`
	for name, body := range map[string]string{"huge": huge, "many": many, "garbage": garbage} {
		c := promptChain(chatPrompt, fieldsOf(t, body), "m", 4096)
		if len(c.Hashes) > 4096/prefix.BlockBytes {
			t.Errorf("%s: %d blocks hashed, more than max_prefix_bytes allows", name, len(c.Hashes))
		}
		if name != "garbage" && c.Bytes < len(body)/2 {
			t.Errorf("%s: measured %d bytes of a %d-byte prompt", name, c.Bytes, len(body))
		}
	}
}

func FuzzPromptChain(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[1]}`)
	f.Add(`{"messages":"just a string","input":[{"type":"x"},3,"y"],"system":{"a":1}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var fields map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &fields) != nil {
			return
		}
		for _, parts := range [][]promptPart{chatPrompt, completionPrompt, responsesPrompt, messagesPrompt} {
			c := promptChain(parts, fields, "m", 1024)
			if len(c.Hashes) > 4 || c.Bytes < len(c.Hashes)*prefix.BlockBytes {
				t.Fatalf("%d blocks, %d bytes", len(c.Hashes), c.Bytes)
			}
		}
	})
}

// BenchmarkPromptChain is the gateway's work per generation request for
// prefix routing: a 6-turn chat with a 1,000-word system prompt (~8 KB).
func BenchmarkPromptChain(b *testing.B) {
	msgs := []map[string]string{{"role": "system", "content": strings.Repeat("wordy ", 1000)}}
	for i := range 6 {
		msgs = append(msgs, map[string]string{"role": "user", "content": strings.Repeat("question ", 30)},
			map[string]string{"role": "assistant", "content": strings.Repeat("answer ", 32+i)})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	fields := fieldsOf(b, string(body))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		promptChain(chatPrompt, fields, "m", 1<<16)
	}
}
