package gateway

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// The affinity map is bounded in size (least recently used go first) and
// in idle time, and never hands one tenant's id to another.
func TestAffinityBoundsAndTenants(t *testing.T) { synctest.Test(t, affinityBoundsAndTenants) }

func affinityBoundsAndTenants(t *testing.T) {
	a := newAffinity(3, time.Minute)
	for i := range 3 {
		a.learn(fmt.Sprintf("resp_%d", i), "alice", "m", "http://u1")
	}
	if _, ok := a.lookup("resp_0", "bob"); ok {
		t.Fatal("bob found alice's id")
	}
	if p, ok := a.lookup("resp_0", "alice"); !ok || p.upstream != "http://u1" || p.model != "m" {
		t.Fatalf("lookup = %+v, %v", p, ok) // resp_0 is now the most recently used
	}
	a.learn("resp_3", "bob", "m", "http://u2") // evicts resp_1, the least recently used
	steps := []struct {
		id, tenant string
		ok         bool
	}{
		{"resp_1", "alice", false}, {"resp_0", "alice", true}, {"resp_2", "alice", true}, {"resp_3", "bob", true}, {"resp_3", "alice", false},
	}
	for i, s := range steps {
		if _, ok := a.lookup(s.id, s.tenant); ok != s.ok {
			t.Errorf("step %d: lookup(%s, %s) = %v, want %v", i, s.id, s.tenant, ok, s.ok)
		}
	}
	if a.Len() != 3 {
		t.Errorf("Len = %d, want 3", a.Len())
	}
	time.Sleep(59 * time.Second)
	if _, ok := a.lookup("resp_0", "alice"); !ok { // used: its idle time restarts
		t.Error("resp_0 expired early")
	}
	time.Sleep(2 * time.Second) // resp_2 and resp_3 idle 61 s
	if _, ok := a.lookup("resp_2", "alice"); ok {
		t.Error("resp_2 outlived its TTL")
	}
	if _, ok := a.lookup("resp_0", "alice"); !ok {
		t.Error("resp_0 expired though used 2 s ago")
	}
	a.learn("", "alice", "m", "http://u1") // nothing to learn
	if a.Len() != 2 {
		t.Errorf("Len = %d, want 2 (resp_2 dropped, empty id ignored)", a.Len())
	}
}
