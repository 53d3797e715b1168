package policy

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
)

// Table is the live quota state: a [Quotas] snapshot plus runtime
// overrides. It is safe for concurrent use. Reads are lock-free (one
// atomic pointer load of an immutable state); writers serialise on a
// mutex and publish a new state (copy on write, as writes are rare admin
// calls). A Table must be made with [NewTable].
type Table struct {
	mu      sync.Mutex // serialises writers
	state   atomic.Pointer[tableState]
	changes changeNotifier
}

// tableState is immutable once published.
type tableState struct {
	version uint64 // one more than the state it replaced
	q       *Quotas
	buckets map[Key]Override
	tenants map[string]Override
}

// NewTable returns a table serving q with no overrides.
func NewTable(q *Quotas) *Table {
	t := new(Table)
	t.state.Store(&tableState{q: q})
	return t
}

// Quotas returns the current configuration snapshot.
func (t *Table) Quotas() *Quotas { return t.state.Load().q }

// Authenticate implements [Quotas.Authenticate] on the current snapshot.
func (t *Table) Authenticate(apiKey string) (*Tenant, bool) {
	return t.state.Load().q.Authenticate(apiKey)
}

// Tenant implements [Quotas.Tenant] on the current snapshot.
func (t *Table) Tenant(id string) (*Tenant, bool) { return t.state.Load().q.Tenant(id) }

// OrgLimits implements [Quotas.OrgLimits] on the current snapshot.
func (t *Table) OrgLimits(org string) Limits { return t.state.Load().q.OrgLimits(org) }

// Limits returns the live limits of bucket k: a bucket override beats a
// tenant override, which beats the configuration.
func (t *Table) Limits(k Key) Limits {
	s := t.state.Load()
	return s.limits(k)
}

func (s *tableState) limits(k Key) Limits { return s.limitsOf(k, s.q.tenants[k.Tenant]) }

// limitsOf is limits with k's tenant found already (nil: unknown).
func (s *tableState) limitsOf(k Key, tn *Tenant) Limits {
	l := s.q.limitsOf(tn, k.Model)
	if len(s.tenants) > 0 { // skip the hash when there are no overrides
		if o, ok := s.tenants[k.Tenant]; ok {
			l = o.Apply(l)
		}
	}
	if len(s.buckets) > 0 {
		if o, ok := s.buckets[k]; ok {
			l = o.Apply(l)
		}
	}
	return l
}

// BaseRate implements [RateSource.BaseRate]: the live Rate of k and
// whether its tenant has high priority. It looks the tenant up once: the
// pacer asks twice a request.
func (t *Table) BaseRate(k Key) (perSec float64, high bool) {
	s := t.state.Load()
	tn := s.q.tenants[k.Tenant]
	return s.limitsOf(k, tn).Rate, tn != nil && tn.Priority == PriorityHigh
}

// RateVersion implements [VersionedRates.RateVersion]: it changes with
// every override change and reload, the only ways a base rate changes.
func (t *Table) RateVersion() uint64 { return t.state.Load().version }

// SetBucketOverride replaces the override of bucket k; the zero Override
// removes it. The tenant must exist in the current snapshot.
func (t *Table) SetBucketOverride(k Key, o Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := CheckModelName(k.Model); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	err := t.update(k.Tenant, func(s *tableState) {
		s.buckets = maps.Clone(s.buckets)
		setOrDelete(&s.buckets, k, o)
	})
	if err == nil {
		t.changes.notify(Change{Key: k})
	}
	return err
}

// SetTenantOverride replaces the override applying to all of tenant's
// buckets; the zero Override removes it.
func (t *Table) SetTenantOverride(tenant string, o Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	err := t.update(tenant, func(s *tableState) {
		s.tenants = maps.Clone(s.tenants)
		setOrDelete(&s.tenants, tenant, o)
	})
	if err == nil {
		t.changes.notify(Change{Tenant: tenant})
	}
	return err
}

// OnChange installs f to be called after each override change and reload
// (nil removes it); see [Pacer.OnChange].
func (t *Table) OnChange(f func(Change)) { t.changes.set(f) }

// update publishes a modified copy of the state after checking that
// tenant is known.
func (t *Table) update(tenant string, change func(*tableState)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.state.Load()
	if _, ok := cur.q.tenants[tenant]; !ok {
		return fmt.Errorf("tenant: unknown tenant %q", tenant)
	}
	next := *cur
	next.version++
	change(&next)
	t.state.Store(&next)
	return nil
}

func setOrDelete[K comparable](m *map[K]Override, k K, o Override) {
	if o.IsZero() {
		delete(*m, k)
		return
	}
	if *m == nil {
		*m = map[K]Override{}
	}
	(*m)[k] = o
}

// Overrides returns copies of the current bucket and tenant overrides.
func (t *Table) Overrides() (buckets map[Key]Override, tenants map[string]Override) {
	s := t.state.Load()
	buckets, tenants = maps.Clone(s.buckets), maps.Clone(s.tenants)
	if buckets == nil {
		buckets = map[Key]Override{}
	}
	if tenants == nil {
		tenants = map[string]Override{}
	}
	return buckets, tenants
}

// Reload swaps in a new configuration snapshot. Each override field
// survives unless the new config changed that same field's value against
// the old config (for a bucket override: the bucket's configured limits;
// for a tenant override: the tenant-level limits). Overrides of tenants
// that no longer exist are dropped.
func (t *Table) Reload(q *Quotas) {
	t.reload(q)
	t.changes.notify(Change{All: true})
}

func (t *Table) reload(q *Quotas) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.state.Load()
	next := &tableState{version: old.version + 1, q: q}
	for k, o := range old.buckets {
		if _, ok := q.tenants[k.Tenant]; ok {
			setOrDelete(&next.buckets, k, o.survive(old.q.Limits(k), q.Limits(k)))
		}
	}
	for id, o := range old.tenants {
		if _, ok := q.tenants[id]; ok {
			setOrDelete(&next.tenants, id, o.survive(old.q.TenantLimits(id), q.TenantLimits(id)))
		}
	}
	t.state.Store(next)
}
