package vllmsim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
)

// The prefix cache keys a prompt by its rendered form: the same tokens
// the simulator counts (whitespace-separated words), in the order a chat
// template would lay them out, with markers between them for what is
// rendered but not counted (a message's role, the tools, a message or
// prompt boundary). Markers change which blocks match, never a count, so
// cached tokens never exceed prompt_tokens.

// Item kinds: a token, or a marker. Each item hashed is a kind byte, a
// length and its bytes, so no two different item sequences hash the
// same bytes.
const (
	itemWord  = 'w' // a token
	itemRole  = 'r' // a message starts, with this role
	itemTools = 't' // the tools, as compact JSON
	itemPart  = 'p' // a content part without text, as compact JSON
	itemNext  = 'n' // the next prompt of a completion's batch
)

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// blockHasher turns a rendered prompt into the chained hashes of its full
// blocks: a running 64-bit FNV-1a over every item, read after every
// BlockSize-th token, so a block's hash covers the whole prompt up to
// its end. It stops hashing once it has max blocks, which bounds the
// work on a huge prompt. The zero value is not usable: see newBlockHasher.
type blockHasher struct {
	h      uint64
	tokens int // tokens hashed
	max    int
	blocks []uint64
}

func newBlockHasher(maxBlocks int) *blockHasher {
	return &blockHasher{h: fnvOffset, max: maxBlocks, blocks: make([]uint64, 0, min(maxBlocks, 1024))}
}

// full reports whether further items would be ignored.
func (b *blockHasher) full() bool { return len(b.blocks) >= b.max }

// item hashes one item; a word may end a block.
func (b *blockHasher) item(kind byte, data string) {
	if b.full() {
		return
	}
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = kind
	n := binary.PutUvarint(hdr[1:], uint64(len(data)))
	b.write(hdr[:1+n])
	for i := 0; i < len(data); i++ {
		b.h = (b.h ^ uint64(data[i])) * fnvPrime
	}
	if kind != itemWord {
		return
	}
	if b.tokens++; b.tokens%BlockSize == 0 {
		b.blocks = append(b.blocks, b.h)
	}
}

func (b *blockHasher) write(p []byte) {
	for _, c := range p {
		b.h = (b.h ^ uint64(c)) * fnvPrime
	}
}

// text hashes the words of s.
func (b *blockHasher) text(s string) {
	for w := range strings.FieldsSeq(s) {
		if b.full() {
			return
		}
		b.item(itemWord, w)
	}
}

// ids hashes token ids as the words that name them.
func (b *blockHasher) ids(ids []int) {
	for _, id := range ids {
		if b.full() {
			return
		}
		b.tokenWord(id)
	}
}

// tokenWord hashes "tok<n>", the word of token n.
func (b *blockHasher) tokenWord(n int) {
	var buf [24]byte
	b.item(itemWord, string(strconv.AppendInt(append(buf[:0], "tok"...), int64(n), 10)))
}

// raw hashes a JSON value as a marker, compacted so that layout does not
// matter; null and absent values hash nothing.
func (b *blockHasher) raw(kind byte, v json.RawMessage) {
	if len(v) == 0 || string(v) == "null" || b.full() {
		return
	}
	var c bytes.Buffer
	if json.Compact(&c, v) != nil {
		return // unreachable: a RawMessage decoded from a body is valid JSON
	}
	b.item(kind, c.String())
}

// content hashes a message's content: a string, or parts whose "text"
// counts (others are markers). Anything else hashes nothing, as it
// counts nothing.
func (b *blockHasher) content(raw json.RawMessage) {
	if text, ok := decode[string](raw); ok {
		b.text(text)
		return
	}
	parts, _ := decode[[]json.RawMessage](raw)
	for _, p := range parts {
		if b.full() {
			return
		}
		if part, ok := decode[struct{ Text *string }](p); ok && part.Text != nil {
			b.text(*part.Text)
		} else {
			b.raw(itemPart, p)
		}
	}
}

// messages hashes chat-style messages: each one's role, then its content.
func (b *blockHasher) messages(msgs []json.RawMessage) {
	for _, raw := range msgs {
		if b.full() {
			return
		}
		m, _ := decode[struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}](raw)
		b.item(itemRole, m.Role)
		b.content(m.Content)
	}
}

// prompt hashes a completion prompt: a string, strings, token ids or
// lists of them (each prompt after the first behind a marker).
func (b *blockHasher) prompt(raw json.RawMessage) {
	if one, ok := decode[string](raw); ok {
		b.text(one)
	} else if many, ok := decode[[]string](raw); ok {
		for i, p := range many {
			if i > 0 {
				b.item(itemNext, "")
			}
			b.text(p)
		}
	} else if ids, ok := decode[[]int](raw); ok {
		b.ids(ids)
	} else if lists, ok := decode[[][]int](raw); ok {
		for i, l := range lists {
			if i > 0 {
				b.item(itemNext, "")
			}
			b.ids(l)
		}
	}
}

// keyPrompt marks j as a generation request for the prefix cache and
// sets its blocks, rendered by render, when the cache is on. Only the
// blocks the cache could hold are hashed.
func (s *Server) keyPrompt(j *job, render func(*blockHasher)) {
	if s.cache == nil {
		return
	}
	h := newBlockHasher(min(j.promptTokens/BlockSize, s.cache.capacity))
	render(h)
	j.cacheable, j.blocks = true, h.blocks
}

// system hashes an Anthropic system prompt as systemWords counts it: a
// string, or text blocks.
func (b *blockHasher) system(raw json.RawMessage) {
	if text, ok := decode[string](raw); ok {
		b.text(text)
		return
	}
	blocks, _ := decode[[]struct {
		Text string `json:"text"`
	}](raw)
	for _, bl := range blocks {
		b.text(bl.Text)
	}
}

// input hashes a Responses input: a string is one user message, a list
// of items is laid out like chat messages.
func (b *blockHasher) input(raw json.RawMessage) {
	if text, ok := decode[string](raw); ok {
		b.item(itemRole, "user")
		b.text(text)
		return
	}
	items, _ := decode[[]json.RawMessage](raw)
	b.messages(items)
}

// generated hashes a completion of n tokens as the words it has.
func (b *blockHasher) generated(n int) {
	for i := range n {
		if b.full() {
			return
		}
		b.tokenWord(i)
	}
}
