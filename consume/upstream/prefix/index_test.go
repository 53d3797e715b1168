package prefix

import (
	"fmt"
	"slices"
	"testing"
)

// hashes is a chain of literal hashes, for index tests that need no
// real prompt.
func hashes(hs ...uint64) Chain { return Chain{Hashes: hs, Bytes: len(hs) * BlockBytes} }

func TestMatchIsTheLongestLeadingRunPerReplica(t *testing.T) {
	x := NewIndex(make([]int64, 3))
	x.Record(0, hashes(1, 2, 3, 4))
	x.Record(1, hashes(1, 2))
	x.Record(2, hashes(9, 10, 11))
	steps := []struct {
		chain Chain
		want  []int
	}{
		{hashes(1, 2, 3, 4, 5), []int{4, 2, 0}},
		{hashes(1, 2, 7), []int{2, 2, 0}},
		{hashes(1), []int{1, 1, 0}},
		{hashes(5, 2, 3), []int{0, 0, 0}}, // a chained hash stands for its whole prefix: 5 differs, so 2 and 3 cannot follow it anywhere
		{hashes(9, 10, 12), []int{0, 0, 2}},
		{hashes(), []int{0, 0, 0}},
	}
	var out []int
	for i, s := range steps {
		out = x.Match(s.chain, out)
		if !slices.Equal(out, s.want) {
			t.Errorf("step %d: Match(%v) = %v, want %v", i, s.chain.Hashes, out, s.want)
		}
	}
}

func TestRecordEvictsLeastRecentlyUsedTailFirst(t *testing.T) {
	x := NewIndex([]int64{minBlocks * TokensPerBlock})
	a := make([]uint64, 10)
	b := make([]uint64, 10)
	for i := range a {
		a[i], b[i] = uint64(100+i), uint64(200+i)
	}
	x.Record(0, hashes(a...))
	x.Record(0, hashes(b...)) // 20 blocks in 16: a's last four go
	if got := x.Match(hashes(a...), nil)[0]; got != 6 {
		t.Fatalf("a matched %d blocks after eviction, want 6 (its tail evicted first)", got)
	}
	if got := x.Match(hashes(b...), nil)[0]; got != 10 {
		t.Fatalf("b matched %d, want all 10", got)
	}
	x.Record(0, hashes(a[:6]...)) // a used again: b's tail goes next
	x.Record(0, hashes(300, 301, 302, 303))
	if got := x.Match(hashes(a...), nil)[0]; got != 6 {
		t.Fatalf("a matched %d, want 6 (recently used)", got)
	}
	if got := x.Match(hashes(b...), nil)[0]; got != 6 {
		t.Fatalf("b matched %d, want 6", got)
	}
	if st := x.Stat(0); st.Blocks != minBlocks || st.Capacity != minBlocks || st.Learned {
		t.Fatalf("Stat = %+v", st)
	}
}

func TestDropForgetsOneReplicaOnly(t *testing.T) {
	x := NewIndex(make([]int64, 2))
	x.Record(0, hashes(1, 2))
	x.Record(1, hashes(1, 2))
	x.Drop(0)
	if got := x.Match(hashes(1, 2), nil); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("after Drop(0): %v, want [0 2]", got)
	}
	x.Drop(1)
	if len(x.words[0]) != 0 {
		t.Fatalf("%d hashes left with no holder", len(x.words[0]))
	}
}

func TestMoreThan64Replicas(t *testing.T) {
	x := NewIndex(make([]int64, 130))
	x.Record(0, hashes(1, 2, 3))
	x.Record(64, hashes(1, 2))
	x.Record(129, hashes(1, 2, 3, 4))
	got := x.Match(hashes(1, 2, 3, 4), nil)
	want := make([]int, 130)
	want[0], want[64], want[129] = 3, 2, 4
	if !slices.Equal(got, want) {
		t.Fatalf("Match = %v", got)
	}
}

func TestSizeIsTheReportedCacheAndBoundsFeedback(t *testing.T) {
	x := NewIndex([]int64{0, 64 * TokensPerBlock})
	c := Chain{Hashes: make([]uint64, 100), Bytes: 100 * BlockBytes}
	for i := range c.Hashes {
		c.Hashes[i] = uint64(i + 1)
	}
	x.Record(0, c)
	x.Size(0, 40*TokensPerBlock)
	x.Size(1, 40*TokensPerBlock) // configured: stays
	if got := []int{x.Stat(0).Capacity, x.Stat(0).Blocks, x.Stat(1).Capacity}; !slices.Equal(got, []int{40, 40, 64}) {
		t.Fatalf("capacity, blocks of 0 and capacity of 1 = %v, want [40 40 64]", got)
	}
	// Predicted 100 % cached, reported 20 %, again and again: each report
	// shrinks the index by a quarter, but not below half the report.
	for range 5 {
		x.Feedback(0, Chain{Hashes: c.Hashes[:40], Bytes: 40 * BlockBytes}, 40, 1000, 200)
	}
	if got := x.Stat(0).Capacity; got != 20 {
		t.Fatalf("capacity after misses = %d, want 20 (half of 40)", got)
	}
	x.Size(0, 40*TokensPerBlock) // the same report: feedback's size stays
	if got := x.Stat(0).Capacity; got != 20 {
		t.Fatalf("capacity after the same report = %d, want 20", got)
	}
	x.Size(0, 48*TokensPerBlock) // a new report: taken as it is
	if got := x.Stat(0).Capacity; got != 48 {
		t.Fatalf("capacity after a new report = %d, want 48", got)
	}
}

func TestFeedbackResizesALearnedReplica(t *testing.T) {
	x := NewIndex([]int64{0, 1 << 20})
	c := Chain{Hashes: make([]uint64, 100), Bytes: 100 * BlockBytes}
	for i := range c.Hashes {
		c.Hashes[i] = uint64(i + 1)
	}
	x.Record(0, c)
	x.Record(1, c)
	start := x.Stat(0).Capacity
	if start != DefaultCacheTokens/TokensPerBlock {
		t.Fatalf("learned replica starts at %d blocks", start)
	}
	// Predicted 100 % cached, reported 20 %, again and again: the error
	// passes the tolerance on the first report (0.25 × 0.8 = 0.2) and the
	// capacity shrinks to three quarters of what the index holds.
	x.Feedback(0, c, 100, 1000, 200)
	if got, want := x.Stat(0).Capacity, 75; got != want {
		t.Fatalf("capacity after a miss = %d, want %d", got, want)
	}
	if got := x.Stat(0).Blocks; got != 75 {
		t.Fatalf("blocks after shrinking = %d, want 75", got)
	}
	// A close prediction moves nothing.
	x.Feedback(0, c, 75, 1000, 760)
	if got := x.Stat(0).Capacity; got != 75 {
		t.Fatalf("capacity after a good prediction = %d", got)
	}
	// Reported more than predicted while full: it grows.
	x.Feedback(0, c, 10, 1000, 900)
	if got, want := x.Stat(0).Capacity, 93; got != want {
		t.Fatalf("capacity after an underestimate = %d, want %d", got, want)
	}
	// A configured size never moves.
	x.Feedback(1, c, 100, 1000, 0)
	if got := x.Stat(1).Capacity; got != (1<<20)/TokensPerBlock {
		t.Fatalf("configured capacity moved to %d", got)
	}
	x.Feedback(0, c, 10, 0, 0) // nothing reported: nothing learned
}

// BenchmarkMatch is the routing decision's index part: 64 replicas,
// 100,000 indexed blocks, a 16 KiB prompt (64 blocks, ~4,000 tokens)
// that one replica holds whole.
func BenchmarkMatch(b *testing.B) {
	x := NewIndex(make([]int64, 64))
	var n uint64
	for r := range 64 {
		for range 1563 / 64 { // ~1,563 blocks per replica: 100,000 in all
			c := make([]uint64, 64)
			for i := range c {
				n++
				c[i] = n
			}
			x.Record(r, hashes(c...))
		}
	}
	held := hashes(slices.Collect(func(yield func(uint64) bool) {
		for i := uint64(1); i <= 64; i++ {
			yield(i)
		}
	})...)
	var out []int
	b.ReportAllocs()
	for b.Loop() {
		out = x.Match(held, out)
	}
	if out[0] != 64 {
		b.Fatal(fmt.Sprint("match ", out[0]))
	}
}

// BenchmarkMatchEveryLength is the bisection's worst case: each of 64
// replicas holds a different number of the prompt's 64 blocks, among
// 100,000 indexed blocks.
func BenchmarkMatchEveryLength(b *testing.B) {
	x := NewIndex(make([]int64, 64))
	chain := make([]uint64, 64)
	for i := range chain {
		chain[i] = uint64(1<<40 + i)
	}
	var n uint64
	for r := range 64 {
		x.Record(r, hashes(chain[:r]...))
		for range 1563/64 - 1 {
			c := make([]uint64, 64)
			for i := range c {
				n++
				c[i] = n
			}
			x.Record(r, hashes(c...))
		}
	}
	var out []int
	b.ReportAllocs()
	for b.Loop() {
		out = x.Match(hashes(chain...), out)
	}
	for r := range 64 {
		if out[r] != r {
			b.Fatalf("replica %d matched %d", r, out[r])
		}
	}
}

// FuzzMatchEqualsTheNaiveWalk: whatever prefixes of one chain the
// replicas hold, Match's bisection finds what a walk of every block of
// every replica finds.
func FuzzMatchEqualsTheNaiveWalk(f *testing.F) {
	f.Add([]byte{0, 5, 64, 3, 3, 17}, uint8(40))
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 200}, uint8(9))
	f.Fuzz(func(t *testing.T, lengths []byte, chainLen uint8) {
		n := min(len(lengths), 70)
		x := NewIndex(make([]int64, n))
		chain := make([]uint64, int(chainLen)%100)
		for i := range chain {
			chain[i] = uint64(i + 1)
		}
		want := make([]int, n)
		for r := range n {
			want[r] = min(int(lengths[r]), len(chain))
			x.Record(r, hashes(chain[:want[r]]...))
		}
		if got := x.Match(hashes(chain...), nil); !slices.Equal(got, want) {
			t.Fatalf("Match = %v, want %v", got, want)
		}
	})
}
