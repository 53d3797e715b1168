package policy

import "time"

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

// Priorities.
const (
	PriorityNormal Priority = iota
	// PriorityHigh tenants keep their pace when a model's column factor
	// is tightened below 1 (see [Pacer.EffectiveRate]).
	PriorityHigh
)

func (p Priority) String() string {
	if p == PriorityHigh {
		return "high"
	}
	return "normal"
}

// Tenant is one configured tenant. Tenants are created by [NewQuotas] and
// are immutable afterwards, so they are safe for concurrent use; the zero
// value is a tenant with no org and no limits of its own.
type Tenant struct {
	ID       string
	Org      string // "" = no org caps
	Priority Priority

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
