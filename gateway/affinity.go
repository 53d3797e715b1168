package gateway

import (
	"container/list"
	"sync"
	"time"
)

// affinity remembers which tenant created each stored response and which
// upstream holds it: vLLM keeps a stored response in the memory of the
// server that made it, so a follow-up (previous_response_id, retrieval,
// cancel) must go there, and only for that tenant. It is bounded in size
// (least recently used ids go first) and in age. Entries live in this
// process only: after a restart, or on another replica, an id is
// unknown (404). Its zero value is not usable; call newAffinity. It is
// safe for concurrent use.
type affinity struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	ids   map[string]*list.Element // of *pin
	order *list.List               // front: most recently used
}

// pin is where one stored response lives.
type pin struct {
	id, tenant, model, upstream string
	at                          time.Time // learned or last used
}

func newAffinity(size int, ttl time.Duration) *affinity {
	return &affinity{max: size, ttl: ttl, ids: map[string]*list.Element{}, order: list.New()}
}

// learn records that tenant's response id lives on upstream.
func (a *affinity) learn(id, tenant, model, upstream string) {
	if id == "" || upstream == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p := &pin{id: id, tenant: tenant, model: model, upstream: upstream, at: time.Now()}
	if el, ok := a.ids[id]; ok {
		el.Value = p
		a.order.MoveToFront(el)
		return
	}
	a.ids[id] = a.order.PushFront(p)
	for a.order.Len() > a.max {
		a.drop(a.order.Back())
	}
}

// lookup finds tenant's response id. Another tenant's id is not found,
// exactly like an unknown one: its existence is not revealed.
func (a *affinity) lookup(id, tenant string) (pin, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	el, ok := a.ids[id]
	if !ok {
		return pin{}, false
	}
	p := el.Value.(*pin)
	now := time.Now()
	if now.Sub(p.at) > a.ttl {
		a.drop(el)
		return pin{}, false
	}
	if p.tenant != tenant {
		return pin{}, false
	}
	p.at = now
	a.order.MoveToFront(el)
	return *p, true
}

// Len is the number of ids remembered.
func (a *affinity) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.order.Len()
}

// drop requires a.mu held.
func (a *affinity) drop(el *list.Element) {
	delete(a.ids, el.Value.(*pin).id)
	a.order.Remove(el)
}
