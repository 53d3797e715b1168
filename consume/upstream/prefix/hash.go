package prefix

import (
	"encoding/binary"
	"hash/maphash"
)

// BlockBytes is the size of a hashed block of the rendered prompt: 64
// tokens at the four bytes per token the gateway estimates with, the
// block llm-d's tokenizer-free mode uses.
const BlockBytes = 256

// seed is the process's hash seed. Hashes are compared only within this
// process, so a random seed costs nothing and makes the index's map keys
// impossible to aim collisions at from outside.
var seed = maphash.MakeSeed()

// Builder computes the chain of a prompt written to it piece by piece.
// The zero value is not usable; create it with [NewBuilder]. It is not
// safe for concurrent use.
type Builder struct {
	max   int // bytes to hash at most; the rest is only counted
	seen  int // bytes written so far, hashed or not
	prev  uint64
	n     int // bytes in buf
	buf   [BlockBytes]byte
	chain []uint64
}

// NewBuilder returns a Builder for a prompt of model that hashes at most
// maxBytes bytes (rounded down to whole blocks; <= 0 hashes nothing).
func NewBuilder(model string, maxBytes int) *Builder {
	b := &Builder{max: max(maxBytes, 0) / BlockBytes * BlockBytes}
	b.prev = maphash.String(seed, model)
	if b.max > 0 {
		b.chain = make([]uint64, 0, min(b.max/BlockBytes, 64))
	}
	return b
}

// Write adds p to the prompt. It never fails.
func (b *Builder) Write(p []byte) (int, error) { return write(b, p), nil }

// WriteString adds s to the prompt.
func (b *Builder) WriteString(s string) (int, error) { return write(b, s), nil }

// write copies p into the block buffer, hashing each block it fills,
// until the hashed part reaches max; the rest is only counted.
func write[T string | []byte](b *Builder, p T) int {
	n := len(p)
	b.seen += n
	for len(p) > 0 && b.hashed() < b.max {
		c := copy(b.buf[b.n:], p)
		b.n += c
		p = p[c:]
		if b.n == BlockBytes {
			b.block()
		}
	}
	return n
}

// Full reports whether every byte the Builder will hash has been
// written: writing more only counts bytes.
func (b *Builder) Full() bool { return b.hashed() >= b.max }

// hashed is how many bytes are in full blocks or in buf.
func (b *Builder) hashed() int { return len(b.chain)*BlockBytes + b.n }

// block hashes the full buffer, chained to the block before it.
func (b *Builder) block() {
	var h maphash.Hash
	h.SetSeed(seed)
	var prev [8]byte
	binary.LittleEndian.PutUint64(prev[:], b.prev)
	h.Write(prev[:])
	h.Write(b.buf[:])
	b.prev = h.Sum64()
	b.chain = append(b.chain, b.prev)
	b.n = 0
}

// Saved is a Builder's state at one moment.
type Saved struct{ b Builder }

// Save returns b's state now, for Restore: a writer that finds halfway
// that it is writing the prompt the wrong way undoes what it wrote.
func (b *Builder) Save() Saved { return Saved{*b} }

// Restore puts back the state Save returned. The hashes added since are
// dropped; a Chain taken since must not be kept.
func (b *Builder) Restore(s Saved) { *b = s.b }

// Chain is the prompt's hashes so far: one per full block, the first
// block first.
func (b *Builder) Chain() Chain { return Chain{Hashes: b.chain, Bytes: b.seen} }

// Chain is what routing knows of a prompt: the chained hashes of its
// leading full blocks and the length of the whole rendered prompt.
type Chain struct {
	Hashes []uint64
	// Bytes is the length of the rendered prompt, hashed or not: the
	// matched part of a prompt is len(matched)×BlockBytes of Bytes.
	Bytes int
}

// Skip counts n more bytes of the prompt without reading them: the part
// past what is hashed, measured for Chain.Bytes.
func (b *Builder) Skip(n int) { b.seen += max(n, 0) }
