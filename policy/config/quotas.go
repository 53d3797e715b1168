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
	defaults := resolve(policy.Limits{}, f.Defaults)
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
		Limits: resolve(defaults, t.Limits), Models: make(map[string]policy.Limits, len(t.Models))}
	for m, ms := range t.Models {
		s.Models[m] = resolve(s.Limits, ms)
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

// resolve overlays the fields set in spec on base.
func resolve(base policy.Limits, spec LimitsSpec) policy.Limits {
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
