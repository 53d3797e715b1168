package consume

import (
	"strconv"
	"testing"
	"unsafe"

	"github.com/pacegate/pacegate/policy"
)

// A remembered name is the one LiteTopicName builds, and the key it is
// remembered under is a copy: a request's tenant and model may be slices
// of a body the cache must not keep.
func TestTopicNamesRemembered(t *testing.T) {
	c := newTopicNames("r1")
	body := `{"tenant":"acme","model":"meta-llama/Llama-3.1-8B"}`
	k := policy.Key{Tenant: body[11:15], Model: body[26:49]}
	want := LiteTopicName("acme", "meta-llama/Llama-3.1-8B", "r1")
	for range 2 {
		if got := c.get(k); got != want {
			t.Fatalf("get(%v) = %q, want %q", k, got, want)
		}
	}
	a, _ := c.slotsOf(k)
	e := c.slots[a].Load() // the first slot, empty before
	if e == nil || e.key != k || e.name != want {
		t.Fatalf("slot holds %+v, want %v named %q", e, k, want)
	}
	if unsafe.StringData(e.key.Tenant) == unsafe.StringData(k.Tenant) || unsafe.StringData(e.key.Model) == unsafe.StringData(k.Model) {
		t.Fatal("the remembered key shares the request's memory")
	}
}

// With three times as many buckets as slots, slots are shared and
// replaced, and every bucket still gets its own name, asked for again or
// not.
func TestTopicNamesCollide(t *testing.T) {
	c := newTopicNames("")
	keys := make([]policy.Key, 3*topicNameSlots)
	for i := range keys {
		keys[i] = policy.Key{Tenant: "t" + strconv.Itoa(i%97), Model: "org/m-" + strconv.Itoa(i/97)}
	}
	for range 2 {
		for _, k := range keys {
			if got, want := c.get(k), LiteTopicName(k.Tenant, k.Model, ""); got != want {
				t.Fatalf("get(%v) = %q, want %q", k, got, want)
			}
		}
	}
}

// Two buckets whose first slots are the same keep their names, asked for
// in turn: the second takes its other slot. (With one slot each, they
// took it from each other at every request.)
func TestTopicNamesSharedSlotKept(t *testing.T) {
	c := newTopicNames("")
	first := map[uint64]policy.Key{}
	var k1, k2 policy.Key
	for i := 0; k1 == (policy.Key{}); i++ {
		k := policy.Key{Tenant: "t" + strconv.Itoa(i), Model: "meta-llama/Llama-3.1-8B-Instruct"}
		a, b := c.slotsOf(k)
		if other, ok := first[a]; ok && a != b {
			if _, b1 := c.slotsOf(other); b1 != b {
				k1, k2 = other, k
			}
		}
		first[a] = k
	}
	built := map[policy.Key]*topicName{}
	for round := range 3 {
		for _, k := range []policy.Key{k1, k2} {
			c.get(k)
			a, b := c.slotsOf(k)
			e := c.slots[a].Load()
			if e == nil || e.key != k {
				e = c.slots[b].Load()
			}
			if round > 0 && built[k] != e {
				t.Fatalf("round %d: %v's name was built again", round, k)
			}
			built[k] = e
		}
	}
}
