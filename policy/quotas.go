package policy

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/pacegate/pacegate/policy/config"
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

// NewQuotas builds the quota model from a parsed file. It validates f
// first, so a File built in code gets the same checks as a parsed one
// (call [config.File.SetDefaults] on it first).
func NewQuotas(f *config.File) (*Quotas, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	q := &Quotas{
		defaults: resolve(Limits{}, f.Defaults),
		tenants:  make(map[string]*Tenant, len(f.Tenants)),
		byDigest: map[[32]byte]*Tenant{},
		orgs:     make(map[string]Limits, len(f.Orgs)),
	}
	for _, o := range f.Orgs {
		q.orgs[o.ID] = Limits{RPM: o.RPM, TPM: o.TPM}
	}
	for i := range f.Tenants {
		spec := &f.Tenants[i]
		t := &Tenant{ID: spec.ID, Org: spec.Org, Weight: 1, limits: resolve(q.defaults, spec.Limits)}
		if spec.Priority == config.PriorityHigh {
			t.Priority = PriorityHigh
		}
		t.models = make(map[string]Limits, len(spec.Models))
		for m, ms := range spec.Models {
			t.models[m] = resolve(t.limits, ms)
		}
		for _, k := range spec.Keys {
			d, err := config.KeyDigest(k)
			if err != nil { // Validate has caught this already
				return nil, fmt.Errorf("tenants[%d]: %w", i, err)
			}
			q.byDigest[d] = t
		}
		q.tenants[t.ID] = t
		q.sorted = append(q.sorted, t)
	}
	slices.SortFunc(q.sorted, func(a, b *Tenant) int { return strings.Compare(a.ID, b.ID) })
	return q, nil
}

// resolve overlays the fields set in spec on base.
func resolve(base Limits, spec config.LimitsSpec) Limits {
	l := base
	if spec.RPM != nil {
		l.RPM = *spec.RPM
	}
	if spec.TPM != nil {
		l.TPM = *spec.TPM
	}
	if spec.Burst != nil {
		l.Burst = *spec.Burst
	}
	if spec.Rate != nil {
		l.Rate = *spec.Rate
	}
	if spec.Backlog != nil {
		l.Backlog = *spec.Backlog
	}
	if spec.MaxWait != nil {
		l.MaxWait = *spec.MaxWait
	}
	return l
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
func (q *Quotas) Limits(k Key) Limits {
	if t, ok := q.tenants[k.Tenant]; ok {
		return t.limitsFor(k.Model)
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
