package policy

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Quotas is the quota model of one configuration snapshot: tenants, their
// API keys and the limits of every bucket. It is immutable once built and
// safe for concurrent use; the zero value has no tenants and zero limits.
type Quotas struct {
	defaults Limits
	tenants  map[string]*Tenant
	sorted   []*Tenant
	byDigest map[[32]byte]*Tenant
	orgs     map[string]Limits
}

// TenantSpec describes one tenant for [NewQuotas] in plain values: its
// limits are already resolved (a field the tenant does not set holds the
// default's value), so policy never needs to know how a file spells them.
// It is plain data; the zero value is refused (it has no ID).
type TenantSpec struct {
	ID       string
	Org      string // "" = no org caps
	Priority Priority
	Weight   float64 // share within the priority band; 0 = 1, else finite and > 0
	// Keys are the SHA-256 digests of the tenant's API keys.
	Keys   [][32]byte
	Limits Limits            // the tenant's limits for any model
	Models map[string]Limits // per-model limits, replacing Limits
}

// NewQuotas builds the quota model from plain values: defaults for
// buckets of unknown tenants, org caps (only RPM and TPM count; an org a
// tenant names but orgs lacks has no caps), and the tenants. It copies
// what it keeps, so the arguments may be reused. It checks what the
// algorithms rely on and returns the first problem: a tenant id, org or
// model name that [CheckModelName] refuses, a duplicate tenant id, an API
// key digest used twice, an unknown priority, or a weight that is not a
// finite number > 0 (0 means the default, 1).
func NewQuotas(defaults Limits, orgs map[string]Limits, tenants []TenantSpec) (*Quotas, error) {
	q := &Quotas{
		defaults: defaults,
		tenants:  make(map[string]*Tenant, len(tenants)),
		byDigest: map[[32]byte]*Tenant{},
		orgs:     maps.Clone(orgs),
	}
	for i := range tenants {
		t, err := newTenant(&tenants[i])
		if err != nil {
			return nil, fmt.Errorf("policy: tenant %q: %w", tenants[i].ID, err)
		}
		if err := q.add(t, tenants[i].Keys); err != nil {
			return nil, fmt.Errorf("policy: tenant %q: %w", t.ID, err)
		}
	}
	slices.SortFunc(q.sorted, func(a, b *Tenant) int { return strings.Compare(a.ID, b.ID) })
	return q, nil
}

// newTenant checks spec and returns its Tenant.
func newTenant(spec *TenantSpec) (*Tenant, error) {
	if err := CheckModelName(spec.ID); err != nil {
		return nil, fmt.Errorf("id: %w", err)
	}
	if spec.Org != "" {
		if err := CheckModelName(spec.Org); err != nil {
			return nil, fmt.Errorf("org: %w", err)
		}
	}
	if spec.Priority >= NumBands {
		return nil, fmt.Errorf("unknown priority %d", spec.Priority)
	}
	w := spec.Weight
	if w == 0 {
		w = 1
	}
	if !(w > 0) || math.IsInf(w, 1) {
		return nil, fmt.Errorf("weight %v: must be finite and > 0", spec.Weight)
	}
	for _, m := range slices.Sorted(maps.Keys(spec.Models)) {
		if err := CheckModelName(m); err != nil {
			return nil, fmt.Errorf("model %q: %w", m, err)
		}
	}
	return &Tenant{ID: spec.ID, Org: spec.Org, Priority: spec.Priority, Weight: w,
		limits: spec.Limits, models: maps.Clone(spec.Models)}, nil
}

// add indexes t by id and by each key digest.
func (q *Quotas) add(t *Tenant, keys [][32]byte) error {
	if _, dup := q.tenants[t.ID]; dup {
		return errors.New("duplicate tenant id")
	}
	for j, d := range keys {
		if _, dup := q.byDigest[d]; dup {
			return fmt.Errorf("keys[%d]: duplicate API key", j)
		}
		q.byDigest[d] = t
	}
	q.tenants[t.ID] = t
	q.sorted = append(q.sorted, t)
	return nil
}

// Authenticate returns the tenant owning apiKey. Keys are looked up by
// their SHA-256 digest, so no secret is ever compared byte by byte (a
// timing difference would only reveal digest prefixes, which do not help
// recover a key).
func (q *Quotas) Authenticate(apiKey string) (*Tenant, bool) {
	if apiKey == "" {
		return nil, false
	}
	t, ok := q.byDigest[sha256.Sum256([]byte(apiKey))]
	return t, ok
}

// Tenant returns the tenant with the given id.
func (q *Quotas) Tenant(id string) (*Tenant, bool) {
	t, ok := q.tenants[id]
	return t, ok
}

// Tenants returns all tenants sorted by ID. The slice is a copy; the
// tenants are shared and immutable.
func (q *Quotas) Tenants() []*Tenant { return slices.Clone(q.sorted) }

// Defaults returns the limits of a bucket nothing overrides.
func (q *Quotas) Defaults() Limits { return q.defaults }

// Limits returns the configured limits of bucket k, field by field: the
// tenant's model override, else the tenant's limits, else the defaults.
// An unknown tenant gets the defaults.
func (q *Quotas) Limits(k Key) Limits { return q.limitsOf(q.tenants[k.Tenant], k.Model) }

// limitsOf is tenant t's limits for model, the defaults when t is nil
// (an unknown tenant): for a caller that has looked the tenant up.
func (q *Quotas) limitsOf(t *Tenant, model string) Limits {
	if t != nil {
		return t.limitsFor(model)
	}
	return q.defaults
}

// TenantLimits returns the tenant-level limits (before model overrides)
// of tenant id, or the defaults for an unknown tenant.
func (q *Quotas) TenantLimits(id string) Limits {
	if t, ok := q.tenants[id]; ok {
		return t.limits
	}
	return q.defaults
}

// OrgLimits returns org's caps; only RPM and TPM are meaningful. An
// unknown or empty org has no caps (the zero Limits).
func (q *Quotas) OrgLimits(org string) Limits { return q.orgs[org] }
