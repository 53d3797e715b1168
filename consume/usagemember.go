package consume

import (
	"bytes"

	"github.com/pacegate/pacegate/consume/jsonscan"
)

// The members of a chunk's usage that readChunkUsage reads, as bits of
// the set of those seen.
const (
	fieldPrompt uint8 = 1 << iota
	fieldCompletion
	fieldTotal
	fieldDetails
)

var (
	promptTokensKey     = []byte("prompt_tokens")
	completionTokensKey = []byte("completion_tokens")
	totalTokensKey      = []byte("total_tokens")
	promptDetailsKey    = []byte("prompt_tokens_details")
	cachedTokensKey     = []byte("cached_tokens")
)

// readChunkUsage decodes a chunk's usage member v as json.Unmarshal
// decodes it into a *chunkUsage, without reflection or allocation: the
// one usage chunk of every stream no longer costs a run of encoding/json.
// ok is false for whatever it does not read exactly (null, an escaped or
// repeated key, a number that is not a plain integer, a value of the
// wrong type); the caller leaves that to encoding/json.
func readChunkUsage(v []byte, only bool) (u Usage, ok bool) {
	var w chunkUsage
	var cached optionalInt // prompt_tokens_details.cached_tokens
	var seen uint8
	it := jsonscan.Members(v)
	for it.Next() {
		if it.KeyEscaped() {
			return Usage{}, false
		}
		field := usageField(it.Key())
		if field == 0 {
			continue
		}
		if seen&field != 0 {
			return Usage{}, false
		}
		seen |= field
		switch field {
		case fieldPrompt:
			ok = readInt(it.Value(), &w.Prompt)
		case fieldCompletion:
			ok = readInt(it.Value(), &w.Completion)
		case fieldTotal:
			ok = readInt(it.Value(), &w.Total)
		case fieldDetails:
			cached, ok = readDetails(it.Value())
		}
		if !ok {
			return Usage{}, false
		}
	}
	if !it.Valid() || !it.Found() {
		return Usage{}, false
	}
	u = w.normal(only)
	u.CachedTokens, u.Cached = cached.n, cached.set
	return u, true
}

// optionalInt is a *int64 member read without allocating one.
type optionalInt struct {
	n   int64
	set bool
}

// usageField is the member a key (its token, quotes included) names, in
// any case, as encoding/json matches names; 0 for any other.
func usageField(key []byte) uint8 {
	name := key[1 : len(key)-1]
	switch {
	case bytes.EqualFold(name, promptTokensKey):
		return fieldPrompt
	case bytes.EqualFold(name, completionTokensKey):
		return fieldCompletion
	case bytes.EqualFold(name, totalTokensKey):
		return fieldTotal
	case bytes.EqualFold(name, promptDetailsKey):
		return fieldDetails
	}
	return 0
}

// readDetails reads prompt_tokens_details' cached_tokens, unset when
// either is null or absent, as encoding/json leaves the pointers.
func readDetails(v []byte) (cached optionalInt, ok bool) {
	if bytes.Equal(v, nullLiteral) {
		return optionalInt{}, true
	}
	it := jsonscan.Members(v)
	seen := false
	for it.Next() {
		if it.KeyEscaped() {
			return optionalInt{}, false
		}
		key := it.Key()
		if !bytes.EqualFold(key[1:len(key)-1], cachedTokensKey) {
			continue
		}
		if seen {
			return optionalInt{}, false
		}
		seen = true
		if bytes.Equal(it.Value(), nullLiteral) {
			continue
		}
		if !readInt(it.Value(), &cached.n) {
			return optionalInt{}, false
		}
		cached.set = true
	}
	return cached, it.Valid() && it.Found()
}

// readInt reads a number into an int64 field as encoding/json does when
// the number is a plain integer of up to 18 digits (which cannot
// overflow); null leaves the field as it is. Anything else is not read.
func readInt(v []byte, dst *int64) bool {
	if bytes.Equal(v, nullLiteral) {
		return true
	}
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(v) {
		n = -n
	}
	*dst = n
	return true
}
