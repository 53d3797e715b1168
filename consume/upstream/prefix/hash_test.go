package prefix

import (
	"slices"
	"strings"
	"testing"
)

func chainOf(model, s string, maxBytes int) Chain {
	b := NewBuilder(model, maxBytes)
	b.WriteString(s)
	return b.Chain()
}

func TestChainSharesExactlyTheCommonFullBlocks(t *testing.T) {
	sys := strings.Repeat("s", 2*BlockBytes+100) // two full blocks and a partial one
	a := chainOf("m", sys+"first question", 1<<20)
	b := chainOf("m", sys+"second question, a longer one", 1<<20)
	if len(a.Hashes) != 2 || len(b.Hashes) != 2 {
		t.Fatalf("blocks = %d, %d; want 2, 2 (the partial block is not hashed)", len(a.Hashes), len(b.Hashes))
	}
	if !slices.Equal(a.Hashes, b.Hashes) {
		t.Fatalf("same two leading blocks, different hashes: %x %x", a.Hashes, b.Hashes)
	}
	if a.Bytes != len(sys)+len("first question") {
		t.Fatalf("Bytes = %d, want the whole prompt %d", a.Bytes, len(sys)+len("first question"))
	}
	// A difference in block 0 changes every hash after it: the chain
	// stands for the whole prefix, not for one block.
	c := chainOf("m", "x"+sys[1:], 1<<20)
	if c.Hashes[0] == a.Hashes[0] || c.Hashes[1] == a.Hashes[1] {
		t.Fatalf("a changed first block left a hash equal: %x vs %x", c.Hashes, a.Hashes)
	}
}

func TestChainIsSeededWithTheModel(t *testing.T) {
	s := strings.Repeat("p", BlockBytes)
	if chainOf("a", s, 1<<20).Hashes[0] == chainOf("b", s, 1<<20).Hashes[0] {
		t.Fatal("two models' identical prompts hash alike: their caches are not shared")
	}
}

func TestChainHashesAtMostMaxBytes(t *testing.T) {
	huge := strings.Repeat("z", 10<<20)
	c := chainOf("m", huge, 4*BlockBytes+10)
	if len(c.Hashes) != 4 || c.Bytes != len(huge) {
		t.Fatalf("blocks %d bytes %d; want 4 blocks (max rounded down) of %d bytes", len(c.Hashes), c.Bytes, len(huge))
	}
	if c := chainOf("m", huge, 0); len(c.Hashes) != 0 {
		t.Fatalf("max 0 hashed %d blocks", len(c.Hashes))
	}
}

// FuzzBuilderSplit: however a prompt is written in pieces, its chain is
// the chain of the whole.
func FuzzBuilderSplit(f *testing.F) {
	f.Add([]byte(strings.Repeat("abc", 300)), uint16(7), uint16(511))
	f.Add([]byte{0, 0xff, '\n'}, uint16(1), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, cut1, cut2 uint16) {
		whole := NewBuilder("m", 1024)
		whole.Write(data)
		i, j := int(cut1)%(len(data)+1), int(cut2)%(len(data)+1)
		i, j = min(i, j), max(i, j)
		parts := NewBuilder("m", 1024)
		parts.Write(data[:i])
		parts.WriteString(string(data[i:j]))
		parts.Write(data[j:])
		if !slices.Equal(whole.Chain().Hashes, parts.Chain().Hashes) || whole.Chain().Bytes != parts.Chain().Bytes {
			t.Fatalf("split at %d,%d: %v != %v", i, j, parts.Chain(), whole.Chain())
		}
		if got := len(whole.Chain().Hashes); got != min(len(data), 1024)/BlockBytes {
			t.Fatalf("%d blocks for %d bytes", got, len(data))
		}
	})
}
