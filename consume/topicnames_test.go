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
	e := c.slots[c.slotOf(k)].Load()
	if e == nil || e.key != k || e.name != want {
		t.Fatalf("slot holds %+v, want %v named %q", e, k, want)
	}
	if unsafe.StringData(e.key.Tenant) == unsafe.StringData(k.Tenant) || unsafe.StringData(e.key.Model) == unsafe.StringData(k.Model) {
		t.Fatal("the remembered key shares the request's memory")
	}
}

// With ten times as many buckets as slots, slots are shared and replaced,
// and every bucket still gets its own name, asked for again or not.
func TestTopicNamesCollide(t *testing.T) {
	c := newTopicNames("")
	keys := make([]policy.Key, 10*topicNameSlots)
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
