package config

import (
	"fmt"

	"github.com/pacegate/pacegate/policy"
)

// Quotas validates f ([File.Validate]) and builds the quota model of its
// defaults, orgs and tenants: each tenant's limits resolve field by field
// (model override, then tenant limits, then defaults), and each key
// becomes its digest ([KeyDigest]). A File built in code gets the same
// checks as a parsed one; call [File.SetDefaults] on it first.
func (f *File) Quotas() (*policy.Quotas, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	defaults := f.Defaults.override().Apply(policy.Limits{})
	orgs := make(map[string]policy.Limits, len(f.Orgs))
	for _, o := range f.Orgs {
		orgs[o.ID] = policy.Limits{RPM: o.RPM, TPM: o.TPM}
	}
	tenants := make([]policy.TenantSpec, len(f.Tenants))
	for i := range f.Tenants {
		t, err := f.Tenants[i].policySpec(defaults)
		if err != nil { // Validate has caught this already
			return nil, fmt.Errorf("tenants[%d]: %w", i, err)
		}
		tenants[i] = t
	}
	return policy.NewQuotas(defaults, orgs, tenants)
}

// policySpec converts a validated tenant, its limits resolved over
// defaults.
func (t *TenantSpec) policySpec(defaults policy.Limits) (policy.TenantSpec, error) {
	s := policy.TenantSpec{ID: t.ID, Org: t.Org, Priority: priorities[t.Priority], Weight: t.Weight,
		Limits: t.Limits.override().Apply(defaults), Models: make(map[string]policy.Limits, len(t.Models))}
	for m, ms := range t.Models {
		s.Models[m] = ms.override().Apply(s.Limits)
	}
	for _, k := range t.Keys {
		d, err := KeyDigest(k)
		if err != nil {
			return s, err
		}
		s.Keys = append(s.Keys, d)
	}
	return s, nil
}

// override is l as policy's layer of limits: the one type that checks
// and applies them. The conversion compiles only while the two structs
// have the same fields.
func (l LimitsSpec) override() policy.Override { return policy.Override(l) }
