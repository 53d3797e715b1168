package vllmsim

import (
	"math"
	"sync"
)

// BlockSize is the prefix cache's block, in tokens (vLLM's default).
const BlockSize = 16

// prefixCache models vLLM's KV-cache blocks for prefix caching: up to
// capacity blocks of BlockSize prompt tokens, each keyed by the chained
// hash of its prompt up to its end ([blockHasher]). A block that a
// running request holds is pinned; the others wait in an LRU list and
// are evicted least recently released first when a new block needs the
// room. A request releases its blocks last one first, so a prompt's tail
// is evicted before its head, as vLLM frees them.
//
// It also counts the blocks that running requests hold outside the cache
// (their partial and generated blocks, and prompt blocks it had no room
// for), for the kv_cache_usage_perc gauge; the running batch never
// evicts cached blocks.
//
// It is safe for concurrent use: mu guards every field below it, and is
// never held with Server.mu.
type prefixCache struct {
	capacity int // blocks

	mu      sync.Mutex
	index   map[uint64]int32 // block hash -> its slot in nodes
	nodes   []cacheNode      // slots; grows up to capacity
	head    int32            // least recently released unpinned block, or -1
	tail    int32            // most recently released unpinned block, or -1
	private int              // blocks running requests hold outside the cache
	pinned  int              // cached blocks some running request holds
}

// cacheNode is one cached block.
type cacheNode struct {
	hash       uint64
	refs       int32 // running requests holding it; 0: in the LRU list
	prev, next int32 // LRU neighbours while refs == 0, -1 at the ends
}

// newPrefixCache returns a cache of tokens/BlockSize blocks (at most
// MaxInt32, the reach of a slot index); its memory grows with use.
func newPrefixCache(tokens int) *prefixCache {
	return &prefixCache{capacity: min(tokens/BlockSize, math.MaxInt32), index: make(map[uint64]int32), head: -1, tail: -1}
}

// lookup pins the longest run of leading blocks of hashes found in the
// cache and returns its length.
func (c *prefixCache) lookup(hashes []uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, h := range hashes {
		i, ok := c.index[h]
		if !ok {
			return n
		}
		c.pin(i)
	}
	return len(hashes)
}

// insert pins hashes[held:] in order, adding the blocks not yet cached
// (evicting unpinned ones when the cache is full), and returns how many
// leading blocks are pinned now. It stops at the first block it has no
// room for: a block past a gap could never be found by lookup.
func (c *prefixCache) insert(hashes []uint64, held int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := held; n < len(hashes); n++ {
		h := hashes[n]
		if i, ok := c.index[h]; ok {
			c.pin(i)
			continue
		}
		i, ok := c.slot()
		if !ok {
			return n
		}
		c.nodes[i] = cacheNode{hash: h, refs: 1, prev: -1, next: -1}
		c.index[h] = i
		c.pinned++
	}
	return len(hashes)
}

// release unpins hashes, last one first: each joins the LRU list as its
// most recent block, so the first block is the last evicted.
func (c *prefixCache) release(hashes []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := len(hashes) - 1; n >= 0; n-- {
		i := c.index[hashes[n]] // pinned blocks are never evicted
		if c.nodes[i].refs--; c.nodes[i].refs == 0 {
			c.pushBack(i)
			c.pinned--
		}
	}
}

// addPrivate changes the count of blocks held outside the cache.
func (c *prefixCache) addPrivate(n int) {
	c.mu.Lock()
	c.private += n
	c.mu.Unlock()
}

// usage is the blocks running requests hold (cached ones they pinned,
// plus those outside the cache) over the capacity, at most 1. A cached
// block no request holds is free to vLLM (evictable at once), so a full
// prefix cache on an idle server reads 0, as vLLM's gauge does.
func (c *prefixCache) usage() float64 {
	c.mu.Lock()
	used := c.pinned + c.private
	c.mu.Unlock()
	if c.capacity == 0 {
		return 0
	}
	return min(float64(used)/float64(c.capacity), 1)
}

// cached is the number of blocks in the cache, for tests.
func (c *prefixCache) cached() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}

// pin adds a holder to block i, taking it out of the LRU list if it was
// free. Requires mu held.
func (c *prefixCache) pin(i int32) {
	if c.nodes[i].refs == 0 {
		c.unlink(i)
		c.pinned++
	}
	c.nodes[i].refs++
}

// slot returns a node slot for a new block: a fresh one below capacity,
// else the least recently released block's, evicted. ok is false when
// every cached block is pinned. Requires mu held.
func (c *prefixCache) slot() (int32, bool) {
	if len(c.nodes) < c.capacity {
		c.nodes = append(c.nodes, cacheNode{})
		return int32(len(c.nodes) - 1), true
	}
	i := c.head
	if i < 0 {
		return 0, false
	}
	c.unlink(i)
	delete(c.index, c.nodes[i].hash)
	return i, true
}

// unlink takes block i out of the LRU list. Requires mu held.
func (c *prefixCache) unlink(i int32) {
	n := &c.nodes[i]
	if n.prev >= 0 {
		c.nodes[n.prev].next = n.next
	} else {
		c.head = n.next
	}
	if n.next >= 0 {
		c.nodes[n.next].prev = n.prev
	} else {
		c.tail = n.prev
	}
	n.prev, n.next = -1, -1
}

// pushBack appends block i to the LRU list as its most recent. Requires
// mu held.
func (c *prefixCache) pushBack(i int32) {
	c.nodes[i].prev, c.nodes[i].next = c.tail, -1
	if c.tail >= 0 {
		c.nodes[c.tail].next = i
	} else {
		c.head = i
	}
	c.tail = i
}
