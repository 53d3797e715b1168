package jsonscan

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// Valid accepts exactly what json.Valid accepts.
func TestValid(t *testing.T) {
	for _, c := range []struct {
		in    string
		valid bool
	}{
		{`{"id":"c","choices":[{"delta":{"content":"a\"b\\u00e9"}}]}`, true},
		{` {"Usage" : {"total_tokens":1}} `, true},
		{`[1,-0.5e+3,true,false,null,"",{}]`, true},
		{`{"a":1,}`, false},
		{`[[]x]`, false},
		{`{"a":01}`, false},
		{`{"a":"\x"}`, false},
		{"{\"a\":\"\x01\"}", false},
		{`{"a":1`, false},
		{`"\u12"`, false},
		{``, false},
		{`1 2`, false},
		{`-`, false},
		{`1.`, false},
		{`1e`, false},
		{`tru`, false},
	} {
		if got := Valid([]byte(c.in)); got != c.valid || got != json.Valid([]byte(c.in)) {
			t.Errorf("Valid(%q) = %v, want %v", c.in, got, c.valid)
		}
	}
}

// Object hands over each top-level member once, in order, as raw bytes;
// nested members are not its business.
func TestObjectMembers(t *testing.T) {
	var got []string
	it := Members([]byte(` { "model" : "m", "messages":[{"role":"user"}],"n":null, "a\u0062":1.5e3 } `))
	for it.Next() {
		got = append(got, string(it.Key())+"="+string(it.Value()))
		if escaped := it.Key()[1] == 'a'; it.KeyEscaped() != escaped {
			t.Errorf("key %s: KeyEscaped %v", it.Key(), it.KeyEscaped())
		}
	}
	want := []string{`"model"="m"`, `"messages"=[{"role":"user"}]`, `"n"=null`, `"a\u0062"=1.5e3`}
	if !it.Valid() || !it.Found() || !slices.Equal(got, want) {
		t.Fatalf("Members = %v, %v, %q; want true, true, %q", it.Valid(), it.Found(), got, want)
	}
	for _, c := range []struct {
		in           string
		valid, found bool
		members      int
	}{{`[1]`, true, false, 0}, {`"s"`, true, false, 0}, {`null`, true, false, 0}, {`{}`, true, true, 0},
		{`{"a":1}x`, false, true, 1}, {`{"a":1,"b"}`, false, true, 1}, {`{"a":1,}`, false, true, 1}, {` `, false, false, 0}} {
		it, n := Members([]byte(c.in)), 0
		for it.Next() {
			n++
		}
		if it.Valid() != c.valid || it.Found() != c.found || n != c.members || it.Next() {
			t.Errorf("Members(%q): valid %v, found %v, %d members; want %v, %v, %d",
				c.in, it.Valid(), it.Found(), n, c.valid, c.found, c.members)
		}
	}
}

func TestArrayElements(t *testing.T) {
	var got []string
	it := Elements([]byte(`[ {"a":[1,2]}, "x" ,null]`))
	for it.Next() {
		got = append(got, string(it.Value()))
		if it.Key() != nil {
			t.Errorf("element %s has key %q", it.Value(), it.Key())
		}
	}
	if want := []string{`{"a":[1,2]}`, `"x"`, `null`}; !it.Valid() || !it.Found() || !slices.Equal(got, want) {
		t.Fatalf("Elements = %v, %v, %q; want true, true, %q", it.Valid(), it.Found(), got, want)
	}
	it = Elements([]byte(`{"a":[1]}`))
	if it.Next() || it.Found() || !it.Valid() {
		t.Error("Elements of an object: found an array, or said it was not valid")
	}
}

func TestString(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		ok        bool
	}{
		{`"user"`, "user", true},
		{`""`, "", true},
		{`"a\"b\u00e9\n"`, "a\"b\u00e9\n", true},
		{"\"caf\xc3\xa9\"", "café", true},
		{"\"bad\xff\"", "bad\ufffd", true},
		{`12`, "", false},
		{`null`, "", false},
		{`"`, "", false},
		{``, "", false},
	} {
		got, ok := String([]byte(c.raw))
		text, tok := Text([]byte(c.raw))
		if got != c.want || ok != c.ok || string(text) != c.want || tok != c.ok {
			t.Errorf("String(%q) = %q, %v and Text %q, %v; want %q, %v", c.raw, got, ok, text, tok, c.want, c.ok)
		}
	}
}

var fuzzSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi \"there\" \u00e9"}],"stream":true}`,
	`{"a":1,"a":2,"A":3,"\u0061":4}`,
	`[{"a":[1,2.5e-3,{"b":null}]},true,false,"x"]`,
	"{\"k\xff\":\"v\xfe\"}",
}

func addSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}

func sameRaw(a, b json.RawMessage) bool { return bytes.Equal(a, b) }

// FuzzValid: Valid agrees with json.Valid on every input.
func FuzzValid(f *testing.F) {
	addSeeds(f, fuzzSeeds...)
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := Valid(b); got != json.Valid(b) {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, got, !got)
		}
	})
}

// FuzzMembers: a map built from Members (keys through String, the last
// of a repeated key winning) is what json.Unmarshal decodes into
// map[string]json.RawMessage, and Members finds a valid object exactly
// when that decode succeeds with a map.
func FuzzMembers(f *testing.F) {
	addSeeds(f, fuzzSeeds...)
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]json.RawMessage{}
		it := Members(b)
		for it.Next() {
			k, ok := String(it.Key())
			if !ok {
				t.Fatalf("Members(%q) gave key %q, which String refuses", b, it.Key())
			}
			got[k] = it.Value()
		}
		if it.Valid() != json.Valid(b) {
			t.Fatalf("Members(%q) valid = %v, json.Valid says %v", b, it.Valid(), !it.Valid())
		}
		object := it.Valid() && it.Found()
		var want map[string]json.RawMessage
		decoded := json.Unmarshal(b, &want) == nil && want != nil
		if object != decoded {
			t.Fatalf("Members(%q) object = %v; json.Unmarshal into a map: %v", b, object, decoded)
		}
		if object && !maps.EqualFunc(got, want, sameRaw) {
			t.Fatalf("Members(%q) members %q; json.Unmarshal %q", b, got, want)
		}
	})
}

// FuzzElements: Elements gives json.Unmarshal's []json.RawMessage.
func FuzzElements(f *testing.F) {
	addSeeds(f, fuzzSeeds...)
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []json.RawMessage
		it := Elements(b)
		for it.Next() {
			got = append(got, it.Value())
		}
		array := it.Valid() && it.Found()
		var want []json.RawMessage
		decoded := json.Unmarshal(b, &want) == nil && want != nil
		if array != decoded {
			t.Fatalf("Elements(%q) array = %v; json.Unmarshal into a slice: %v", b, array, decoded)
		}
		if array && !slices.EqualFunc(got, want, sameRaw) {
			t.Fatalf("Elements(%q) elements %q; json.Unmarshal %q", b, got, want)
		}
	})
}

// FuzzString: String and Text decode a string token as json.Unmarshal
// does, and refuse whatever it refuses.
func FuzzString(f *testing.F) {
	addSeeds(f, `"plain"`, `"a\"b\u00e9\n"`, "\"bad\xff\"", `12`, `"\ud800"`)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		wantOK := json.Unmarshal(raw, &want) == nil && len(raw) > 0 && raw[0] == '"'
		got, ok := String(raw)
		text, tok := Text(raw)
		if ok != wantOK || tok != wantOK || (ok && (got != want || string(text) != want)) {
			t.Fatalf("String(%q) = %q, %v, Text %q, %v; json.Unmarshal: %q, %v", raw, got, ok, text, tok, want, wantOK)
		}
	})
}

// Find counts the top-level members that may have the key, in any case
// or escaped, and keeps the last one's value; nested ones are not its
// business.
func TestFind(t *testing.T) {
	key := []byte(`"usage"`)
	for _, c := range []struct {
		in      string
		count   int
		escaped bool
		value   string
	}{
		{`{"choices":[],"usage":{"total_tokens":5}}`, 1, false, `{"total_tokens":5}`},
		{`{"x":{"usage":1},"y":[{"usage":2}]}`, 0, false, ``},
		{`{"Usage":1,"usage":null}`, 2, false, `null`},
		{`{"us\u0061ge":3,"id":"c"}`, 1, true, `3`},
		{`{"usages":1,"sage":2}`, 0, false, ``},
		{`{"uſage":4}`, 1, false, `4`},
		{`[{"usage":1}]`, 0, false, ``},
	} {
		m, valid := Find([]byte(c.in), key)
		if !valid || m.Count != c.count || m.Escaped != c.escaped || string(m.Value) != c.value {
			t.Errorf("Find(%s) = %+v, %v; want %d, %v, %q", c.in, m, valid, c.count, c.escaped, c.value)
		}
	}
	if _, valid := Find([]byte(`{"usage":1,}`), key); valid {
		t.Error("Find of invalid JSON says it is valid")
	}
}

// FuzzFind: Find agrees with Members on which top-level members may
// have the key, and with Valid.
func FuzzFind(f *testing.F) {
	addSeeds(f, append(fuzzSeeds, `{"usage":{"a":1},"USAGE":null,"us\u0061ge":2}`)...)
	key := []byte(`"usage"`)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, valid := Find(b, key)
		var want Match
		it := Members(b)
		for it.Next() {
			if it.KeyEscaped() || bytes.EqualFold(it.Key(), key) {
				want.Count++
				want.Escaped = want.Escaped || it.KeyEscaped()
				want.Value = it.Value()
			}
		}
		if valid != Valid(b) || (valid && (m.Count != want.Count || m.Escaped != want.Escaped || !bytes.Equal(m.Value, want.Value))) {
			t.Fatalf("Find(%q) = %+v, %v; Members: %+v, %v", b, m, valid, want, Valid(b))
		}
	})
}

// A long string is read 8 bytes at a time: a special byte anywhere in
// it, or a byte of UTF-8 beside one, is still seen where it is.
func TestLongStringsSeeEverySpecialByte(t *testing.T) {
	for _, special := range []string{"\x00", "\x1f", `"`, `\`, `\n`, `\u00e9`, "\x7f", "\xc3\xa9", "\xff"} {
		for at := range 48 {
			s := []byte(`"` + strings.Repeat("a", at) + special + strings.Repeat("b", 48-at) + `"`)
			if got, want := Valid(s), json.Valid(s); got != want {
				t.Errorf("Valid(%q) = %v, json.Valid says %v", s, got, want)
			}
		}
	}
}
