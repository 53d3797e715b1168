package jsonscan

import (
	"encoding/json"
	"unicode/utf8"
)

// String returns the string a raw JSON string token holds, as
// json.Unmarshal gives it: escapes decoded, invalid UTF-8 made U+FFFD.
// A plain token (ASCII, nothing escaped: a model name, a role) is copied
// from between its quotes; any other is decoded by encoding/json. ok is
// false when raw is not a string.
func String(raw []byte) (string, bool) {
	if inner, ok := plainString(raw); ok {
		return string(inner), true
	}
	return decode(raw)
}

// Text is String without the copy of a plain token: its text is the
// slice between the quotes, aliasing raw.
func Text(raw []byte) ([]byte, bool) {
	if inner, ok := plainString(raw); ok {
		return inner, true
	}
	s, ok := decode(raw)
	return []byte(s), ok
}

// plainString returns the bytes between raw's quotes when raw is a
// string token with nothing to decode.
func plainString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c >= utf8.RuneSelf || special[c] {
			return nil, false
		}
	}
	return inner, true
}

func decode(raw []byte) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}
