package policy

import (
	"hash/maphash"
	"sync"
)

// numShards splits every keyed store so that concurrent calls for
// different keys rarely share a mutex.
const numShards = 64

// sweepPerAdd is how many entries each insertion inspects for idleness: a
// constant, so eviction costs O(1) per new key and never needs a
// goroutine, and a shard cannot grow faster than it is swept. Calls for a
// key already present do not sweep: at a million keys the swept entries
// are cold in the CPU cache, and the hot path should not pay for them.
const sweepPerAdd = 2

// store is a sharded map from Key to per-key state V, with lazy eviction
// by a rotating sweep. Each shard keeps its entries in a slice (so the
// sweep has a cursor to rotate) and indexes them by a 64-bit seeded hash
// of the key: a map[uint64]int32 costs about 60 bytes per key less than
// a map[Key]int32 and hashes faster. The rare key whose hash collides
// with another's goes to a small overflow map.
//
// Safe for concurrent use through lock and the shard mutex; call init
// before use.
type store[V any] struct {
	seed maphash.Seed
	// idle reports whether an entry may be dropped at now (nanoseconds
	// on the owner's time line) because a fresh entry would behave the
	// same.
	idle   func(v *V, now int64) bool
	shards []storeShard[V]
	// testHash replaces the key hash in tests, to force collisions.
	testHash func(Key) uint64
}

type storeShard[V any] struct {
	mu       sync.Mutex
	idx      map[uint64]int32 // key hash -> index in ents
	overflow map[Key]int32    // keys whose hash is taken by another key
	ents     []storeEntry[V]
	cursor   int
	_        [64]byte // keep neighbouring shards' mutexes off one cache line
}

type storeEntry[V any] struct {
	key Key
	v   V
}

func (s *store[V]) init(shards int, idle func(*V, int64) bool) {
	s.seed = maphash.MakeSeed()
	s.idle = idle
	s.shards = make([]storeShard[V], shards)
	for i := range s.shards {
		s.shards[i].idx = map[uint64]int32{}
	}
}

func (s *store[V]) hash(k Key) uint64 {
	if s.testHash != nil {
		return s.testHash(k)
	}
	return maphash.String(s.seed, k.Tenant) ^ maphash.String(s.seed, k.Model)*0x9e3779b97f4a7c15
}

// lock locks k's shard and returns it with k's hash.
func (s *store[V]) lock(k Key) (*storeShard[V], uint64) {
	h := s.hash(k)
	sh := &s.shards[(h>>32)%uint64(len(s.shards))]
	sh.mu.Lock()
	return sh, h
}

// get returns k's state (nil if absent). The pointer is valid until the
// shard is unlocked or modified. requires mu held
func (sh *storeShard[V]) get(s *store[V], k Key, h uint64, now int64) *V {
	if i, ok := sh.find(k, h); ok {
		return &sh.ents[i].v
	}
	return nil
}

// find returns k's index. requires mu held
func (sh *storeShard[V]) find(k Key, h uint64) (int32, bool) {
	if i, ok := sh.idx[h]; ok && sh.ents[i].key == k {
		return i, true
	}
	if len(sh.overflow) > 0 {
		i, ok := sh.overflow[k]
		return i, ok
	}
	return 0, false
}

// add inserts k (absent) with the zero state and returns it. The pointer
// is valid until the shard is unlocked or modified. requires mu held
func (sh *storeShard[V]) add(k Key, h uint64) *V {
	i := int32(len(sh.ents))
	sh.ents = append(sh.ents, storeEntry[V]{key: k})
	sh.setIndex(k, h, i)
	return &sh.ents[i].v
}

// setIndex records that k is at i. requires mu held
func (sh *storeShard[V]) setIndex(k Key, h uint64, i int32) {
	if j, taken := sh.idx[h]; taken && sh.ents[j].key != k {
		if sh.overflow == nil {
			sh.overflow = map[Key]int32{}
		}
		sh.overflow[k] = i
		return
	}
	sh.idx[h] = i
}

// getOrAdd is get, then, when absent, a sweep and add. requires mu held
func (sh *storeShard[V]) getOrAdd(s *store[V], k Key, h uint64, now int64) (v *V, fresh bool) {
	if v := sh.get(s, k, h, now); v != nil {
		return v, false
	}
	return sh.addSwept(s, k, h, now), true
}

// addSwept is a sweep, then add: how an absent key joins. requires mu
// held
func (sh *storeShard[V]) addSwept(s *store[V], k Key, h uint64, now int64) *V {
	sh.sweep(s, now)
	return sh.add(k, h)
}

// sweep inspects sweepPerAdd entries at the cursor and drops idle ones.
// requires mu held
func (sh *storeShard[V]) sweep(s *store[V], now int64) {
	for range sweepPerAdd {
		if len(sh.ents) == 0 {
			return
		}
		if sh.cursor >= len(sh.ents) {
			sh.cursor = 0
		}
		if s.idle(&sh.ents[sh.cursor].v, now) {
			sh.remove(s, sh.cursor) // the moved-in entry is looked at next time
			continue
		}
		sh.cursor++
	}
}

// remove drops entry i by moving the last entry into its place.
// requires mu held
func (sh *storeShard[V]) remove(s *store[V], i int) {
	last := len(sh.ents) - 1
	sh.unindex(s, sh.ents[i].key)
	if i != last {
		moved := sh.ents[last].key
		sh.unindex(s, moved)
		sh.ents[i] = sh.ents[last]
		sh.setIndex(moved, s.hash(moved), int32(i))
	}
	sh.ents[last] = storeEntry[V]{} // let the GC have the strings
	sh.ents = sh.ents[:last]
	if cap(sh.ents) > 64 && len(sh.ents) < cap(sh.ents)/4 {
		sh.shrink(s)
	}
}

// unindex forgets where k is. requires mu held
func (sh *storeShard[V]) unindex(s *store[V], k Key) {
	if _, ok := sh.overflow[k]; ok {
		delete(sh.overflow, k)
		return
	}
	delete(sh.idx, s.hash(k))
}

// shrink gives memory back after a spike: Go maps never shrink, so the
// index is rebuilt too. O(len), amortised over the 3/4·cap removals that
// led here. requires mu held
func (sh *storeShard[V]) shrink(s *store[V]) {
	sh.ents = append([]storeEntry[V](nil), sh.ents...)
	sh.idx = make(map[uint64]int32, len(sh.ents))
	sh.overflow = nil
	for i := range sh.ents {
		k := sh.ents[i].key
		sh.setIndex(k, s.hash(k), int32(i))
	}
}

// sweepAll sweeps every shard once.
func (s *store[V]) sweepAll(now int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(s, now)
		sh.mu.Unlock()
	}
}

// len returns the number of entries held.
func (s *store[V]) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.ents)
		sh.mu.Unlock()
	}
	return n
}
