package policy

import (
	"strconv"
	"testing"
)

// TestStoreHashCollisions forces every key onto one hash, so all but one
// live in the overflow map, and checks lookups, sweeping and shrinking.
func TestStoreHashCollisions(t *testing.T) {
	var s store[int64]
	dead := map[int64]bool{}
	s.init(1, func(v *int64, _ int64) bool { return dead[*v] })
	s.testHash = func(Key) uint64 { return 7 }
	key := func(i int) Key { return Key{Tenant: "t" + strconv.Itoa(i), Model: "m"} }
	lookup := func(i int) (int64, bool) {
		sh, h := s.lock(key(i))
		defer sh.mu.Unlock()
		if j, ok := sh.find(key(i), h); ok {
			return sh.ents[j].v, true
		}
		return 0, false
	}
	const n = 200
	for i := range n {
		sh, h := s.lock(key(i))
		v, fresh := sh.getOrAdd(&s, key(i), h, 0)
		if !fresh {
			t.Fatalf("key %d found before it was added", i)
		}
		*v = int64(i)
		sh.mu.Unlock()
	}
	for i := range n {
		if v, ok := lookup(i); !ok || v != int64(i) {
			t.Fatalf("key %d: %v %v", i, v, ok)
		}
	}
	for i := range n - 10 { // all but the last ten go idle
		dead[int64(i)] = true
	}
	for i := n; i < 2*n; i++ { // n insertions sweep 2n entries: more than a full rotation
		sh, h := s.lock(key(i))
		v, _ := sh.getOrAdd(&s, key(i), h, 0)
		*v = int64(i)
		sh.mu.Unlock()
	}
	if s.len() != n+10 {
		t.Fatalf("len after sweep = %d, want %d", s.len(), n+10)
	}
	for i := range 2 * n {
		if v, ok := lookup(i); ok != (i >= n-10) || (ok && v != int64(i)) {
			t.Fatalf("after sweep, key %d: %v %v", i, v, ok)
		}
	}
}
