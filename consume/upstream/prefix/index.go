package prefix

import (
	"math/bits"
	"sync"
)

// TokensPerBlock is how many tokens a block stands for, at the gateway's
// estimate of four bytes per token. Cache sizes are given in tokens and
// turned into blocks with it.
const TokensPerBlock = BlockBytes / 4

// Sizes of a replica's part of the index, in blocks.
const (
	// DefaultCacheTokens is where a replica whose cache size is not
	// configured starts: a modest vLLM replica's KV cache. Feedback then
	// moves it towards what the replica reports.
	DefaultCacheTokens = 1 << 18
	minBlocks          = 16
	maxBlocks          = 1 << 22
)

// Feedback tuning: a replica's capacity moves when the smoothed error of
// its predicted cached part of a prompt passes errTolerance, by a factor
// of shrink or grow.
const (
	errSmoothing = 0.25
	errTolerance = 0.15
	shrink       = 0.75
	grow         = 1.25
	// reportedSlack bounds how far feedback moves a reported size: only
	// as far as the gateway's four bytes a token may be off the model's
	// tokenizer.
	reportedSlack = 2
)

// Index remembers which blocks each replica probably holds. Create it
// with [NewIndex]; replicas are numbered as the caller's pool numbers
// them. It is safe for concurrent use: mu guards every field.
type Index struct {
	mu sync.Mutex
	// words[w][hash] is the set of replicas 64w..64w+63 holding hash, one
	// bit each; a hash no replica holds has no entry.
	words []map[uint64]uint64
	reps  []replica
}

type replica struct {
	blocks   lru
	capacity int  // blocks it may hold
	fixed    bool // configured: feedback leaves capacity alone
	// reported is the cache's size as the replica reports it, in blocks
	// (Size); 0 when it does not. Feedback keeps capacity within a
	// factor reportedSlack of it.
	reported int
	err      float64 // smoothed reported − predicted cached part
}

// NewIndex returns an index of len(cacheTokens) replicas; replica i's
// cache holds cacheTokens[i] tokens, or, when that is 0, a size learned
// from feedback that starts at DefaultCacheTokens.
func NewIndex(cacheTokens []int64) *Index {
	x := &Index{reps: make([]replica, len(cacheTokens))}
	for w := 0; w < (len(cacheTokens)+63)/64; w++ {
		x.words = append(x.words, map[uint64]uint64{})
	}
	for i, t := range cacheTokens {
		r := &x.reps[i]
		r.blocks, r.fixed = newLRU(), t > 0
		if t <= 0 {
			t = DefaultCacheTokens
		}
		r.capacity = clampBlocks(t / TokensPerBlock)
	}
	return x
}

func clampBlocks(n int64) int { return int(min(max(n, minBlocks), maxBlocks)) }

// Match sets out[r] to how many leading blocks of c replica r holds and
// returns out, grown to one entry per replica.
//
// A chained hash stands for its whole prefix, and a replica's blocks are
// evicted tail first, so the replicas holding block i are (nearly
// always) a subset of those holding block i−1. Match relies on that: it
// bisects the chain between blocks whose holder sets differ, so it costs
// a couple of lookups per distinct match length instead of one per block
// (a replica found holding a later block without an earlier one is
// counted up to where the bisection saw it go).
func (x *Index) Match(c Chain, out []int) []int {
	out = append(out[:0], make([]int, len(x.reps))...)
	last := len(c.Hashes) - 1
	if last < 0 {
		return out
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for w, holders := range x.words {
		first := holders[c.Hashes[0]]
		if first == 0 {
			continue
		}
		end := holders[c.Hashes[last]] & first
		setEach(out, w, end, last+1)
		bisect(holders, c.Hashes, out, w, 0, last, first, end)
	}
	return out
}

// linearSpan is the span of blocks below which bisect walks them one by
// one: with many distinct match lengths in it, that is fewer lookups.
const linearSpan = 8

// bisect sets the match of the replicas in word w that hold block lo
// (set mlo) but not block hi (set mhi): each holds up to the block after
// which it disappears.
func bisect(holders map[uint64]uint64, hs []uint64, out []int, w, lo, hi int, mlo, mhi uint64) {
	if mlo == mhi {
		return
	}
	if hi-lo <= linearSpan {
		for i := lo + 1; i < hi; i++ { // fewer lookups than bisecting further
			m := holders[hs[i]]&mlo | mhi
			setEach(out, w, mlo&^m, i)
			mlo = m
		}
		setEach(out, w, mlo&^mhi, hi)
		return
	}
	mid := (lo + hi) / 2
	mm := holders[hs[mid]] & mlo
	bisect(holders, hs, out, w, lo, mid, mlo, mm|mhi)
	bisect(holders, hs, out, w, mid, hi, mm|mhi, mhi)
}

// all is the set of replicas in word w.
func (x *Index) all(w int) uint64 {
	n := len(x.reps) - 64*w
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<n - 1
}

// setEach sets out[r] = v for each replica r in word w's set m.
func setEach(out []int, w int, m uint64, v int) {
	for m != 0 {
		b := bits.TrailingZeros64(m)
		out[64*w+b] = v
		m &^= 1 << b
	}
}

// Record notes that replica r holds every block of c now (it was sent
// there, and prefilling it caches it). The first block becomes the most
// recently used, as vLLM frees a sequence's blocks tail first; blocks
// beyond r's capacity are evicted least recently used first.
func (x *Index) Record(r int, c Chain) {
	x.mu.Lock()
	defer x.mu.Unlock()
	rep := &x.reps[r]
	for i := len(c.Hashes) - 1; i >= 0; i-- {
		if rep.blocks.touch(c.Hashes[i]) {
			x.set(r, c.Hashes[i])
		}
	}
	x.fit(r)
}

// fit evicts r's least recently used blocks beyond its capacity.
// Requires mu held.
func (x *Index) fit(r int) {
	rep := &x.reps[r]
	for rep.blocks.len() > rep.capacity {
		h, _ := rep.blocks.evict()
		x.clear(r, h)
	}
}

// Drop forgets every block of replica r: it went down or left the pool,
// and whatever it held is gone or unreachable.
func (x *Index) Drop(r int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	rep := &x.reps[r]
	rep.blocks.each(func(h uint64) { x.clear(r, h) })
	rep.blocks, rep.err = newLRU(), 0
}

// set and clear add and remove r in hash h's set. Require mu held.
func (x *Index) set(r int, h uint64) { x.words[r/64][h] |= 1 << (r % 64) }

func (x *Index) clear(r int, h uint64) {
	m := x.words[r/64]
	if v := m[h] &^ (1 << (r % 64)); v != 0 {
		m[h] = v
	} else {
		delete(m, h)
	}
}

// Size sets replica r's size to its cache's as the replica reports it
// (vLLM's num_gpu_blocks × block_size), unless configured: a learned
// size that starts from a guess can shrink far below the cache, and then
// the index forgets the conversations the replica still holds. It does
// nothing while the report stays the same, so that [Index.Feedback]
// still corrects the gateway's token estimate within reportedSlack.
func (x *Index) Size(r int, tokens int64) {
	n := clampBlocks(tokens / TokensPerBlock)
	x.mu.Lock()
	defer x.mu.Unlock()
	rep := &x.reps[r]
	if rep.fixed || tokens <= 0 || rep.reported == n {
		return
	}
	rep.reported, rep.capacity, rep.err = n, n, 0
	x.fit(r)
}

// Feedback corrects replica r's size from one response: matched blocks
// of c were predicted to be in its cache, and it reported cached of its
// prompt tokens as cache hits. The parts of the prompt are compared, as
// the replica counts tokens its own way. An index that keeps predicting
// more than the replica reports is larger than the cache, and shrinks;
// one that keeps predicting less has evicted blocks the cache still
// holds, and grows, if it is full. A configured size does not move.
func (x *Index) Feedback(r int, c Chain, matched int, prompt, cached int64) {
	if prompt <= 0 || c.Bytes <= 0 || cached < 0 {
		return
	}
	predicted := min(float64(matched*BlockBytes)/float64(c.Bytes), 1)
	reported := min(float64(cached)/float64(prompt), 1)
	x.mu.Lock()
	defer x.mu.Unlock()
	rep := &x.reps[r]
	if rep.fixed {
		return
	}
	rep.err += errSmoothing * (reported - predicted - rep.err)
	switch {
	case rep.err < -errTolerance:
		rep.resize(float64(min(rep.capacity, rep.blocks.len())) * shrink)
		x.fit(r)
	case rep.err > errTolerance && rep.blocks.len() >= rep.capacity:
		rep.resize(float64(rep.capacity) * grow)
	}
}

// resize sets rep's capacity to n blocks, within reportedSlack of its
// reported size if any, and starts a new error average.
func (rep *replica) resize(n float64) {
	if rep.reported > 0 {
		n = min(max(n, float64(rep.reported)/reportedSlack), float64(rep.reported)*reportedSlack)
	}
	rep.capacity, rep.err = clampBlocks(int64(n)), 0
}

// ReplicaStat is one replica's part of the index.
type ReplicaStat struct {
	Blocks   int // blocks held
	Capacity int // blocks it may hold
	Learned  bool
}

// Stat reports replica r.
func (x *Index) Stat(r int) ReplicaStat {
	x.mu.Lock()
	defer x.mu.Unlock()
	rep := &x.reps[r]
	return ReplicaStat{Blocks: rep.blocks.len(), Capacity: rep.capacity, Learned: !rep.fixed}
}
