package consume

import (
	"encoding/json"
	"strconv"
	"strings"
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
		{`{"uſage":{"total_tokens":1}}`, true, true}, // encoding/json folds ſ to s
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

// FuzzScanJSON: scanJSON agrees with json.Valid on every input, a valid
// chunk it reads as carrying no usage has none for ParseUsage, and Scan
// reads every valid chunk as Read does (the usage chunk's member decoded
// alone as the whole chunk decoded).
func FuzzScanJSON(f *testing.F) {
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`))
	f.Add([]byte(`{"id":"c","choices":[{"delta":{"content":"tok \"1\" \\ \u00e9"}}]}`))
	f.Add([]byte(`[{"a":[1,2.5e-3,{"b":null}]},true,false]`))
	f.Add([]byte(`{"usage":{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":2}},"choices":[ ]}`))
	f.Add([]byte(`{"choices":[{"delta":{}}],"usage":{"prompt_tokens":6,"completion_tokens":1}}`))
	f.Add([]byte(`{"choices":null,"Usage":{"prompt_tokens":1},"usage_":"usage"}`))
	f.Add([]byte(`{"choices":{},"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"choices":[],"CHOICES":[1],"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":1.5}}`))
	f.Add([]byte(`{"ch\u006fices":[1],"usage":{"total_tokens":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		valid, usage := scanJSON(b)
		if valid != json.Valid(b) {
			t.Fatalf("scanJSON(%q) valid = %v, json.Valid says %v", b, valid, !valid)
		}
		if _, parsed := ParseUsage(b); valid && parsed && !usage {
			t.Fatalf("scanJSON(%q) missed the usage ParseUsage reads", b)
		}
		var scanned, read Tally
		r, ok := scanned.Scan("", b)
		if ok != valid {
			t.Fatalf("Scan(%q) valid = %v, json.Valid says %v", b, ok, valid)
		}
		if want := read.Read(EventChunk, "", b); valid && (r != want || scanned != read) {
			t.Fatalf("Scan(%q) = %+v, tally %+v; Read says %+v, tally %+v", b, r, scanned, want, read)
		}
	})
}

// usageChunk is the chunk include_usage adds at the end of a stream, as
// llm-d-inference-sim writes it.
var usageChunk = []byte(`{"id":"chatcmpl-e1d22872-9b70-5e11-8af1-a790c5b9da68","model":"sim-model","object":"chat.completion.chunk","created":1796483004,` +
	`"usage":{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0}},"choices":[]}`)

// BenchmarkScanUsageChunk is the relay's pass over the usage chunk (the
// usage member decoded alone); BenchmarkParseUsageChunk decodes the
// whole chunk, as Scan did before.
func BenchmarkScanUsageChunk(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		t := Tally{}
		if r, _ := t.Scan("", usageChunk); !r.Reported {
			b.Fatal("no usage")
		}
	}
}

func BenchmarkParseUsageChunk(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseUsage(usageChunk); !ok || !json.Valid(usageChunk) {
			b.Fatal("no usage")
		}
	}
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

// FuzzScanBody holds ScanBody to the two passes it replaces: json.Valid,
// then Read of an EventBody (Body, which decodes the whole body).
func FuzzScanBody(f *testing.F) {
	f.Add([]byte(`{"id":"c","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`))
	f.Add([]byte(`{"usage":{"input_tokens":4,"output_tokens":1,"cache_read_input_tokens":2},"type":"message"}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":3},"Usage":{"completion_tokens":2}}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":3},"usage":null}`))
	f.Add([]byte(`{"us\u0061ge":{"total_tokens":7}}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":"3"}}`))
	f.Add([]byte(`[{"usage":{"prompt_tokens":3}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var scanned, read Tally
		r, valid := scanned.ScanBody(b)
		if valid != json.Valid(b) {
			t.Fatalf("ScanBody(%q) valid = %v, json.Valid says %v", b, valid, !valid)
		}
		if !valid {
			return
		}
		if want := read.Read(EventBody, "", b); r != want || scanned != read {
			t.Fatalf("ScanBody(%q) = %+v, tally %+v; Read says %+v, tally %+v", b, r, scanned, want, read)
		}
	})
}

// answerBody is a non-streamed chat completion of n words of generated
// text, as vLLM writes it.
func answerBody(n int) []byte {
	text := strings.Repeat("token ", n)
	return []byte(`{"id":"chatcmpl-r1","object":"chat.completion","created":946684800,"model":"sim-model","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + text + `","tool_calls":[]},"logprobs":null,"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":12,"total_tokens":` + strconv.Itoa(12+n) + `,"completion_tokens":` + strconv.Itoa(n) + `,"prompt_tokens_details":null}}`)
}

// BenchmarkScanBody is the relay's one pass over a non-streamed answer
// (8 and 1,000 generated words): JSON check and usage, the usage member
// decoded alone. BenchmarkValidPlusBody is the two passes it replaces.
func BenchmarkScanBody(b *testing.B) {
	benchBodyRead(b, func(t *Tally, body []byte) (Reading, bool) { return t.ScanBody(body) })
}

func BenchmarkValidPlusBody(b *testing.B) {
	benchBodyRead(b, func(t *Tally, body []byte) (Reading, bool) {
		return t.Read(EventBody, "", body), json.Valid(body)
	})
}

// benchBodyRead times read on answers of 8 and 1,000 words.
func benchBodyRead(b *testing.B, read func(*Tally, []byte) (Reading, bool)) {
	for _, n := range []int{8, 1000} {
		body := answerBody(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				t := Tally{}
				if r, ok := read(&t, body); !ok || r.Usage.CompletionTokens != int64(n) {
					b.Fatalf("valid %v, reading %+v", ok, r)
				}
			}
		})
	}
}

// FuzzReadChunkUsage holds readChunkUsage to what it stands in for:
// encoding/json decoding a usage member into a *chunkUsage. Where it
// reads a member at all, it reads what encoding/json does.
func FuzzReadChunkUsage(f *testing.F) {
	f.Add([]byte(`{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":2}}`))
	f.Add([]byte(`{"Prompt_Tokens":-7,"completion_tokens":null,"prompt_tokens_details":null,"x":[1,{"total_tokens":5}]}`))
	f.Add([]byte(`{"prompt_tokens":1,"PROMPT_TOKENS":2}`))
	f.Add([]byte(`{"prompt_tokens":1e3,"total_tokens":99999999999999999999}`))
	f.Add([]byte(`{"prompt_tokens_details":{"cached_tokens":null,"other":1},"total_tokens":"9"}`))
	f.Add([]byte(`{"pr\u006fmpt_tokens":4}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, ok := readChunkUsage(b, false)
		if !ok {
			return
		}
		var w *chunkUsage
		if err := json.Unmarshal(b, &w); err != nil || w == nil {
			t.Fatalf("readChunkUsage(%q) = %+v; encoding/json: %v, %v", b, u, w, err)
		}
		if want := w.normal(false); u != want {
			t.Fatalf("readChunkUsage(%q) = %+v; encoding/json reads %+v", b, u, want)
		}
	})
}

// The usage chunk is read without encoding/json, to the same totals
// (BenchmarkScanUsageChunk counts its allocations: none).
func TestScanUsageChunk(t *testing.T) {
	var tally Tally
	r, ok := tally.Scan("", usageChunk)
	want := Usage{PromptTokens: 6, CompletionTokens: 3, TotalTokens: 9, Only: true, CachedTokens: 0, Cached: true}
	if !ok || r != (Reading{Read: true, Reported: true, Final: true, Usage: want}) {
		t.Fatalf("Scan = %+v, %v; want usage %+v, final", r, ok, want)
	}
	if tally.Usage != want || !tally.Known || !tally.Final || tally.Streamed != 0 {
		t.Fatalf("tally %+v", tally)
	}
}
