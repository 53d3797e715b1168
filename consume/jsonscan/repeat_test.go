package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

func chunk(text string) []byte {
	return fmt.Appendf(nil, `{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1733400000,"model":"m",`+
		`"choices":[{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":null}]}`, text)
}

// A stream's token chunks repeat the one before but for the token's
// text: each is known valid without a pass. A chunk that differs
// elsewhere (the finish chunk, a text with an escape, the usage chunk)
// gets the pass, with Find's answer, and becomes the one kept.
func TestRepeatPassesOnlyWhatChanged(t *testing.T) {
	key := []byte(`"usage"`)
	var r Repeat
	r.Start(make([]byte, 512))
	passes := 0
	find := func(b []byte) (Match, bool) {
		if !r.repeats(b) {
			passes++
			return r.Find(b, key)
		}
		return Match{}, true
	}
	usage := []byte(`{"id":"chatcmpl-7f3a","choices":[],"usage":{"prompt_tokens":3}}`)
	for i, c := range []struct {
		b      []byte
		passes int // passes so far
	}{
		{chunk("tok0 "), 1},
		{chunk("tok1 "), 1},
		{chunk("tok10 "), 1}, // longer
		{chunk("t"), 1},      // shorter
		{chunk(""), 1},       // empty
		{chunk("tok2 "), 1},
		{chunk("tok2 "), 1}, // the same
		{chunk("a\nb"), 2},  // an escape: a pass
		{chunk("tok3 "), 3}, // the string kept had an escape
		{chunk("tok4 "), 3}, // and again without a pass
		{bytes.Replace(chunk("x"), []byte(`null}`), []byte(`"length"}`), 1), 4}, // the finish: a null became a string
		{usage, 5},
		{chunk("tok5 "), 6}, // after the usage chunk, nothing is kept
	} {
		m, valid := find(c.b)
		want, wantValid := Find(c.b, key)
		if valid != wantValid || m.Count != want.Count || !bytes.Equal(m.Value, want.Value) {
			t.Errorf("%d: %s: %+v, %v; Find says %+v, %v", i, c.b, m, valid, want, wantValid)
		}
		if passes != c.passes {
			t.Errorf("%d: %s: %d passes so far, want %d", i, c.b, passes, c.passes)
		}
	}
}

// A value that would break out of the string, or break JSON, gets the
// pass: a quote, a backslash or a control byte in the changed text.
func TestRepeatRefusesBytesThatNeedAnEscape(t *testing.T) {
	var r Repeat
	key := []byte(`"usage"`)
	if _, valid := r.Find(chunk("tok0 "), key); !valid {
		t.Fatal("the first chunk is valid")
	}
	for _, text := range []string{`a"b`, `a\b`, "a\x01b"} {
		b := bytes.Replace(chunk("tok0 "), []byte("tok0 "), []byte(text), 1)
		if r.repeats(b) {
			t.Errorf("%q repeats the chunk before", b)
		}
		if _, valid := r.Find(b, key); valid != json.Valid(b) {
			t.Errorf("%q: valid %v, json.Valid %v", b, valid, !valid)
		}
		r.Find(chunk("tok0 "), key)
	}
}

// FuzzRepeat: after any value a, a Repeat's answer for b (a with a part
// replaced, as a stream's next chunk is) is Find's, and json.Valid's.
func FuzzRepeat(f *testing.F) {
	f.Add(chunk("tok0 "), []byte("tok1"), uint16(93), uint16(97))
	f.Add(chunk("tok0 "), []byte(`"`), uint16(93), uint16(93))
	f.Add([]byte(`{"a":"xy","b":["z"]}`), []byte(`q`), uint16(6), uint16(7))
	f.Add([]byte(`{"a":"x\ny","usage":1}`), []byte(`q`), uint16(6), uint16(7))
	f.Fuzz(func(t *testing.T, a, part []byte, from, to uint16) {
		i := min(int(from), len(a))
		j := min(max(int(to), i), len(a))
		b := append(append(append([]byte{}, a[:i]...), part...), a[j:]...)
		key := []byte(`"usage"`)
		var r Repeat
		r.Find(a, key)
		m, valid := r.Find(b, key)
		want, wantValid := Find(b, key)
		if valid != wantValid || valid != json.Valid(b) || m.Count != want.Count || m.Escaped != want.Escaped ||
			!bytes.Equal(m.Value, want.Value) {
			t.Fatalf("after %q, Repeat.Find(%q) = %+v, %v; Find says %+v, %v", a, b, m, valid, want, wantValid)
		}
	})
}

// A stream's token chunks, op = one chunk: through a Repeat, and each
// with Find's whole pass.
func BenchmarkRepeatChunk(b *testing.B) {
	benchmarkChunks(b, func(r *Repeat, c, key []byte) bool { _, ok := r.Find(c, key); return ok })
}

func BenchmarkFindChunk(b *testing.B) {
	benchmarkChunks(b, func(_ *Repeat, c, key []byte) bool { _, ok := Find(c, key); return ok })
}

func benchmarkChunks(b *testing.B, find func(r *Repeat, c, key []byte) bool) {
	chunks := make([][]byte, 64)
	for i := range chunks {
		chunks[i] = chunk(fmt.Sprintf("tok%d ", i))
	}
	key := []byte(`"usage"`)
	var r Repeat
	r.Start(make([]byte, 512))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !find(&r, chunks[i%len(chunks)], key) {
			b.Fatal("invalid")
		}
	}
}
