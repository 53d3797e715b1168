package policy

import "sync/atomic"

// Change describes which buckets a rate change touches: exactly one of
// All, Key, Tenant or Model is set. Listeners use it to wake the buckets a
// speed-up concerns, so that requests already queued feel it at once.
type Change struct {
	All    bool   // the global factor, or a config reload
	Key    Key    // one bucket's override
	Tenant string // a tenant's override (all its buckets)
	Model  string // a model's column factor
}

// Matches reports whether bucket k is touched by c.
func (c Change) Matches(k Key) bool {
	switch {
	case c.All:
		return true
	case c.Tenant != "":
		return k.Tenant == c.Tenant
	case c.Model != "":
		return k.Model == c.Model
	default:
		return k == c.Key
	}
}

// changeNotifier holds one listener, called after a change is published.
// The zero value has none. Safe for concurrent use.
type changeNotifier struct {
	fn atomic.Pointer[func(Change)]
}

// set installs f (nil removes it).
func (n *changeNotifier) set(f func(Change)) {
	if f == nil {
		n.fn.Store(nil)
		return
	}
	n.fn.Store(&f)
}

// notify calls the listener, if any. Callers must not hold their locks:
// the listener may read the Table and the Pacer.
func (n *changeNotifier) notify(c Change) {
	if f := n.fn.Load(); f != nil {
		(*f)(c)
	}
}
