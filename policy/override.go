package policy

import (
	"errors"
	"time"
)

// Override is a partial set of limits: a nil field leaves that limit as
// it is. It is the one way limits are layered and the one place they are
// checked: the configuration resolves each bucket as defaults, then the
// tenant's limits, then its model section, each layer an Override
// applied with [Override.Apply]; the admin API's runtime overrides (see
// [Table]) are applied the same way on top. The zero value overrides
// nothing (and setting it as a runtime override removes one).
//
// Its fields match the configuration's LimitsSpec one for one, so that
// the config converts its layers to Overrides and cannot drift from it.
type Override struct {
	RPM, TPM, Burst *int64
	Rate            *float64
	Backlog         *int
	MaxWait         *time.Duration
}

// IsZero reports whether o overrides nothing.
func (o Override) IsZero() bool { return o == Override{} }

// Check calls report for every field of o that no bucket may have, in
// field order, with the field's config name ("rpm", "max_wait") and the
// rule it breaks: a negative rpm, tpm, burst or backlog; a rate that is
// not > 0 (NaN included; +Inf is unpaced); a max_wait that is not > 0.
func (o Override) Check(report func(field, problem string)) {
	for _, f := range []struct {
		name string
		v    *int64
	}{{"rpm", o.RPM}, {"tpm", o.TPM}, {"burst", o.Burst}} {
		if f.v != nil && *f.v < 0 {
			report(f.name, "must be >= 0")
		}
	}
	if o.Rate != nil && !(*o.Rate > 0) {
		report("rate", "must be > 0")
	}
	if o.Backlog != nil && *o.Backlog < 0 {
		report("backlog", "must be >= 0")
	}
	if o.MaxWait != nil && *o.MaxWait <= 0 {
		report("max_wait", "must be > 0")
	}
}

// Validate reports the first problem [Override.Check] finds, as
// "field: problem", or nil.
func (o Override) Validate() error {
	var err error
	o.Check(func(field, problem string) {
		if err == nil {
			err = errors.New(field + ": " + problem)
		}
	})
	return err
}

// Apply overlays the fields o sets on l.
func (o Override) Apply(l Limits) Limits {
	if o.RPM != nil {
		l.RPM = *o.RPM
	}
	if o.TPM != nil {
		l.TPM = *o.TPM
	}
	if o.Burst != nil {
		l.Burst = *o.Burst
	}
	if o.Rate != nil {
		l.Rate = *o.Rate
	}
	if o.Backlog != nil {
		l.Backlog = *o.Backlog
	}
	if o.MaxWait != nil {
		l.MaxWait = *o.MaxWait
	}
	return l
}

// survive returns o without the fields whose configured value changed
// between old and new: a config edit to a field wins over an older
// runtime override of that same field.
func (o Override) survive(old, new Limits) Override {
	if old.RPM != new.RPM {
		o.RPM = nil
	}
	if old.TPM != new.TPM {
		o.TPM = nil
	}
	if old.Burst != new.Burst {
		o.Burst = nil
	}
	if old.Rate != new.Rate {
		o.Rate = nil
	}
	if old.Backlog != new.Backlog {
		o.Backlog = nil
	}
	if old.MaxWait != new.MaxWait {
		o.MaxWait = nil
	}
	return o
}
