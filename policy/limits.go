package policy

import (
	"fmt"
	"time"
)

// Limits are the effective limits of one bucket (tenant+model). The zero
// value means: no RPM/TPM/burst cap, and a zero Rate, Backlog and MaxWait
// (a bucket that is never released and holds nothing; a configuration
// always sets them).
type Limits struct {
	RPM   int64 // requests per minute; 0 = no cap
	TPM   int64 // tokens per minute; 0 = no cap
	Burst int64 // burst bucket capacity in requests; 0 = no burst check
	// Rate is the pace, in requests/s, at which the bucket is released to
	// the pool; +Inf = unpaced.
	Rate    float64
	Backlog int           // max requests queued in the bucket
	MaxWait time.Duration // longest a request may wait in the bucket
}

// Priority ranks tenants. The zero value is PriorityNormal.
type Priority uint8

// Priorities. The values are not ordered by rank: use [Priority.Band].
const (
	PriorityNormal Priority = iota
	// PriorityHigh tenants keep their pace when a model's column factor
	// is tightened below 1 (see [Pacer.EffectiveRate]), and rank first
	// for capacity (see [Priority.Band]).
	PriorityHigh
	// PriorityLow tenants rank last for capacity (see [Priority.Band]).
	PriorityLow
)

// NumBands is the number of priority bands: [Priority.Band] is in
// [0, NumBands).
const NumBands = 3

// String returns "high", "normal" or "low" (the config's spelling).
func (p Priority) String() string {
	switch p {
	case PriorityHigh:
		return "high"
	case PriorityLow:
		return "low"
	case PriorityNormal:
		return "normal"
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

// Band returns p's rank for capacity, in strict order: 0 for high, 1 for
// normal, 2 for low. A lower band is always served before a higher one.
// An unknown Priority (never in a [Quotas]) ranks as normal.
func (p Priority) Band() int {
	switch p {
	case PriorityHigh:
		return 0
	case PriorityLow:
		return 2
	}
	return 1
}

// Tenant is one configured tenant. Tenants are created by [NewQuotas] and
// are immutable afterwards, so they are safe for concurrent use; the zero
// value is a tenant with no org and no limits of its own, normal priority
// and a zero Weight.
type Tenant struct {
	ID       string
	Org      string // "" = no org caps
	Priority Priority
	// Weight is the tenant's share of capacity against the other tenants
	// of its band: > 0 in every Tenant of a [Quotas] (default 1). A
	// Tenant built as a literal has 0: treat it as 1.
	Weight float64

	limits Limits            // tenant limits over defaults
	models map[string]Limits // model overrides over limits
}

// limitsFor returns the tenant's configured limits for model.
func (t *Tenant) limitsFor(model string) Limits {
	if l, ok := t.models[model]; ok {
		return l
	}
	return t.limits
}
