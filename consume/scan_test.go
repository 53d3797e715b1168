package consume

import (
	"encoding/json"
	"testing"
)

// Scan accepts exactly what json.Valid accepts and finds the usage
// member where ParseUsage finds it.
func TestScanJSON(t *testing.T) {
	for _, c := range []struct {
		in           string
		valid, usage bool
	}{
		{`{"id":"c","choices":[{"delta":{"content":"a\"b\\u00e9"}}]}`, true, false},
		{`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, true, true},
		{`{"choices":[{"delta":{}}],"usage":null}`, true, false},
		{`{"x":{"usage":{"total_tokens":1}}}`, true, false},
		{` {"Usage" : {"total_tokens":1}} `, true, true},
		{`[1,-0.5e+3,true,false,null,"",{}]`, true, false},
		{`{"a":1,}`, false, false},
		{`[[]x]`, false, false},
		{`{"a":01}`, false, false},
		{`{"a":"\x"}`, false, false},
		{"{\"a\":\"\x01\"}", false, false},
		{`{"a":1`, false, false},
		{`"\u12"`, false, false},
		{``, false, false},
		{`1 2`, false, false},
		{`-`, false, false},
		{`1.`, false, false},
		{`1e`, false, false},
		{`tru`, false, false},
	} {
		valid, usage := scanJSON([]byte(c.in))
		if valid != c.valid || usage != c.usage || valid != json.Valid([]byte(c.in)) {
			t.Errorf("scanJSON(%q) = %v, %v; want %v, %v", c.in, valid, usage, c.valid, c.usage)
		}
	}
}

// FuzzScanJSON: scanJSON agrees with json.Valid on every input, and a
// valid chunk it reads as carrying no usage has none for ParseUsage.
func FuzzScanJSON(f *testing.F) {
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`))
	f.Add([]byte(`{"id":"c","choices":[{"delta":{"content":"tok \"1\" \\ \u00e9"}}]}`))
	f.Add([]byte(`[{"a":[1,2.5e-3,{"b":null}]},true,false]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		valid, usage := scanJSON(b)
		if valid != json.Valid(b) {
			t.Fatalf("scanJSON(%q) valid = %v, json.Valid says %v", b, valid, !valid)
		}
		if _, parsed := ParseUsage(b); valid && parsed && !usage {
			t.Fatalf("scanJSON(%q) missed the usage ParseUsage reads", b)
		}
	})
}

var tokenChunk = []byte(`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":946684800,"model":"sim-model","choices":[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}]}`)

// BenchmarkScanChunk is the relay's one pass over a token chunk: JSON
// check and usage read (compare BenchmarkValidPlusUsage, the two passes
// it replaces).
func BenchmarkScanChunk(b *testing.B) {
	b.SetBytes(int64(len(tokenChunk)))
	b.ReportAllocs()
	for b.Loop() {
		t := Tally{}
		if _, ok := t.Scan("", tokenChunk); !ok {
			b.Fatal("not JSON")
		}
	}
}

// BenchmarkValidPlusUsage is what the relay and the two readers did per
// chunk before: json.Valid, then each reader's usage check.
func BenchmarkValidPlusUsage(b *testing.B) {
	b.SetBytes(int64(len(tokenChunk)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(tokenChunk) {
			b.Fatal("not JSON")
		}
		gw, meter := Tally{}, Tally{}
		gw.Chunk("", tokenChunk)
		meter.Chunk("", tokenChunk)
	}
}
