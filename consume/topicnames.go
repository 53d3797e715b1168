package consume

import (
	"hash/maphash"
	"strings"
	"sync/atomic"

	"github.com/pacegate/pacegate/policy"
)

// topicNameSlots is how many buckets' LiteTopic names a Queue remembers
// at most (128 KiB of slots).
const topicNameSlots = 1 << 14

// topicNames remembers the LiteTopic names of recent buckets, so that a
// bucket's name is built once rather than for every request: most model
// names a vLLM pool serves hold a '/' or a '.' (meta-llama/Llama-3.1-8B),
// which LiteTopicName hashes with sha256, at about 1 µs and ten
// allocations a request on the queue's hop. A bucket's name may take
// either of two slots its key's hash picks, replacing whichever bucket's
// was there when both are taken, so its memory stays fixed however many
// buckets there are. With one slot per bucket, two buckets of a hundred
// already shared one about as often as not, and took it from each other
// at every request; with two, a bucket loses its name only to two others
// sharing both its slots. Each slot is an atomic pointer to an immutable
// entry, so that readers take no lock. The zero value is not ready: use
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
	a, b := c.slotsOf(k)
	ea := c.slots[a].Load()
	if ea != nil && ea.key == k {
		return ea.name
	}
	eb := c.slots[b].Load()
	if eb != nil && eb.key == k {
		return eb.name
	}
	e := &topicName{
		key:  policy.Key{Tenant: strings.Clone(k.Tenant), Model: strings.Clone(k.Model)},
		name: LiteTopicName(k.Tenant, k.Model, c.replica),
	}
	// The first slot if it is free, else the second if that is; with
	// both taken, either one, by a's parity.
	if ea != nil && (eb == nil || a&1 == 0) {
		a = b
	}
	c.slots[a].Store(e)
	return e.name
}

// slotsOf is the two slots k's name may take.
func (c *topicNames) slotsOf(k policy.Key) (a, b uint64) {
	h := maphash.String(c.seed, k.Tenant)*31 + maphash.String(c.seed, k.Model)
	return h % topicNameSlots, (h >> 32) % topicNameSlots
}
