package policy

import "time"

// Limits are the effective limits of one bucket (tenant+model). The zero
// value means: no RPM/TPM/burst cap, and a zero Rate, Backlog and MaxWait
// (which a config never produces: see [config.DefaultRate]).
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
	// is tightened below 1 (see [Pacer.EffectiveRate]), and are served
	// first when the pool is saturated.
	PriorityHigh
	// PriorityLow tenants are served last when the pool is saturated.
	PriorityLow
)

// NumBands is the number of priority bands.
const NumBands = 3

// Band is p's band for pool capacity, served strictly in order: 0 for
// high, 1 for normal, 2 for low.
func (p Priority) Band() int {
	switch p {
	case PriorityHigh:
		return 0
	case PriorityLow:
		return 2
	default:
		return 1
	}
}

func (p Priority) String() string {
	switch p {
	case PriorityHigh:
		return "high"
	case PriorityLow:
		return "low"
	default:
		return "normal"
	}
}

// Tenant is one configured tenant. Tenants are created by [NewQuotas] and
// are immutable afterwards, so they are safe for concurrent use; the zero
// value is a tenant with no org and no limits of its own.
type Tenant struct {
	ID       string
	Org      string // "" = no org caps
	Priority Priority
	// Weight is the tenant's share of a saturated pool against others of
	// its band (> 0; 1 unless configured).
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
