package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// chatBody is a streamed chat request: "short" is the overhead bench's
// two-message chat, "long" a 6-turn conversation with a 1,000-word
// system prompt (about 8 KB), the kind prefix routing is for.
func chatBody(long bool) []byte {
	msgs := []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}}
	if long {
		msgs = []map[string]string{{"role": "system", "content": strings.Repeat("wordy ", 1000)}}
		for i := range 6 {
			msgs = append(msgs, map[string]string{"role": "user", "content": strings.Repeat("question ", 30)},
				map[string]string{"role": "assistant", "content": strings.Repeat("answer ", 32+i)})
		}
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "max_tokens": 64, "messages": msgs})
	return body
}

// BenchmarkParseChat is the gateway's work on a chat request's body
// before it is queued: the checks of parseAPIRequest and the prompt's
// chain for prefix routing.
func BenchmarkParseChat(b *testing.B) {
	for _, size := range []struct {
		name string
		long bool
	}{{"short", false}, {"long", true}} {
		body := chatBody(size.long)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req, e := parseAPIRequest(body, chatEndpoint)
				if e != nil {
					b.Fatal(e.Message)
				}
				promptChain(chatPrompt, req.fields, req.Model, 1<<16)
			}
		})
	}
}
