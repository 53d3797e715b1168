package fairshare

import (
	"testing"

	"github.com/pacegate/pacegate/policy"
)

// Best across several models follows one fair order: the highest band
// first, then the lowest counter, then the earliest join, whichever model
// each bucket is of.
func TestBestAcrossModelsIsOneFairOrder(t *testing.T) {
	s := New(0)
	ran := policy.Key{Tenant: "ran", Model: "a"}
	fresh := policy.Key{Tenant: "fresh", Model: "b"}
	s.Join(ran, 1, 1, t0)
	s.Start(ran, 100, t0) // charged while it waits: counter 100
	s.Join(fresh, 1, 1, t0)
	models := []string{"a", "b"}
	steps := []struct {
		do   func()
		want policy.Key
	}{
		{func() {}, fresh}, // the lower counter
		{func() { s.Join(policy.Key{Tenant: "hi", Model: "a"}, 0, 1, t0) }, policy.Key{Tenant: "hi", Model: "a"}},
		{func() { s.Join(policy.Key{Tenant: "hi2", Model: "b"}, 0, 1, t0) }, policy.Key{Tenant: "hi", Model: "a"}}, // joined later
		{func() { s.Grant(policy.Key{Tenant: "hi", Model: "a"}) }, policy.Key{Tenant: "hi2", Model: "b"}},
		{func() { s.Grant(policy.Key{Tenant: "hi2", Model: "b"}) }, fresh},
		{func() { s.Grant(fresh) }, ran},
	}
	for i, st := range steps {
		st.do()
		if got, ok := s.Best(models); !ok || got != st.want {
			t.Fatalf("step %d: Best = %v, %v; want %v", i, got, ok, st.want)
		}
	}
	if got, ok := s.Best([]string{"b"}); ok {
		t.Fatalf("Best of b with nothing of b waiting = %v, want none", got)
	}
}

// One model's lock held does not hold up a whole grant cycle of another
// model: each model has a lock of its own. With one lock for every model
// this test would never end.
func TestOneModelsLockDoesNotHoldUpAnother(t *testing.T) {
	s := New(0)
	s.Join(policy.Key{Tenant: "t", Model: "a"}, 1, 1, t0)
	held := s.lock("a")
	defer held.mu.Unlock()
	k := policy.Key{Tenant: "u", Model: "b"}
	s.Join(k, 1, 1, t0)
	if got, ok := s.Best([]string{"b"}); !ok || got != k {
		t.Fatalf("Best = %v, %v; want %v", got, ok, k)
	}
	if got := s.Access(k, -1, 0, 1, 0, t0); got != AccessHeadroom {
		t.Fatalf("Access = %v, want AccessHeadroom (alone on its model)", got)
	}
	if !s.GrantHold(k, t0) {
		t.Fatal("GrantHold: k was not waiting")
	}
	s.Start(k, 10, t0)
	s.Done(k, t0)
	if f, ok := s.Flow(k, t0); !ok || f.Counter != 10 || f.Running != 0 {
		t.Fatalf("Flow = %+v, %v; want counter 10, nothing running", f, ok)
	}
}
