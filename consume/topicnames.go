package consume

import (
	"hash/maphash"
	"strings"
	"sync/atomic"

	"github.com/pacegate/pacegate/policy"
)

// topicNameSlots is how many buckets' LiteTopic names a Queue remembers
// at most (32 KiB of slots).
const topicNameSlots = 4096

// topicNames remembers the LiteTopic names of recent buckets, so that a
// bucket's name is built once rather than for every request: most model
// names a vLLM pool serves hold a '/' or a '.' (meta-llama/Llama-3.1-8B),
// which LiteTopicName hashes with sha256, at about 1 µs and ten
// allocations a request on the queue's hop. It is direct-mapped: a
// bucket's name takes the slot its key's hash picks, replacing whichever
// bucket's was there, so its memory stays fixed however many buckets
// there are. Each slot is an atomic pointer to an immutable entry, so
// that readers take no lock. The zero value is not ready: use
// newTopicNames.
type topicNames struct {
	seed    maphash.Seed
	replica string
	slots   [topicNameSlots]atomic.Pointer[topicName]
}

// topicName is one bucket's name. Its key's strings are its own copies:
// a request's tenant and model may be slices of its whole body.
type topicName struct {
	key  policy.Key
	name string
}

func newTopicNames(replica string) *topicNames {
	return &topicNames{seed: maphash.MakeSeed(), replica: replica}
}

// get returns k's LiteTopic name (see LiteTopicName).
func (c *topicNames) get(k policy.Key) string {
	slot := &c.slots[c.slotOf(k)]
	if e := slot.Load(); e != nil && e.key == k {
		return e.name
	}
	e := &topicName{
		key:  policy.Key{Tenant: strings.Clone(k.Tenant), Model: strings.Clone(k.Model)},
		name: LiteTopicName(k.Tenant, k.Model, c.replica),
	}
	slot.Store(e)
	return e.name
}

// slotOf is the slot k's name takes.
func (c *topicNames) slotOf(k policy.Key) uint64 {
	return (maphash.String(c.seed, k.Tenant)*31 + maphash.String(c.seed, k.Model)) % topicNameSlots
}
