package admin

import (
	"encoding/json"
	"math"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// overrideFields are the limit fields a PUT may carry, named as in the
// config file.
var overrideFields = []string{"rpm", "tpm", "burst", "rate", "backlog", "max_wait"}

// limitsJSON renders limits with the config file's names; max_wait is a
// Go duration string ("30s"), as in the file.
type limitsJSON struct {
	RPM     int64   `json:"rpm"`
	TPM     int64   `json:"tpm"`
	Burst   int64   `json:"burst"`
	Rate    float64 `json:"rate"`
	Backlog int     `json:"backlog"`
	MaxWait string  `json:"max_wait"`
}

func toLimitsJSON(l policy.Limits) limitsJSON {
	return limitsJSON{RPM: l.RPM, TPM: l.TPM, Burst: l.Burst, Rate: jsonRate(l.Rate), Backlog: l.Backlog, MaxWait: l.MaxWait.String()}
}

// overrideJSON renders an override: only the fields it sets.
type overrideJSON struct {
	RPM     *int64   `json:"rpm,omitempty"`
	TPM     *int64   `json:"tpm,omitempty"`
	Burst   *int64   `json:"burst,omitempty"`
	Rate    *float64 `json:"rate,omitempty"`
	Backlog *int     `json:"backlog,omitempty"`
	MaxWait string   `json:"max_wait,omitempty"`
}

// String renders the override as JSON, for logs.
func (o overrideJSON) String() string {
	b, _ := json.Marshal(o) // cannot fail: numbers and strings
	return string(b)
}

func toOverrideJSON(o policy.Override) overrideJSON {
	j := overrideJSON{RPM: o.RPM, TPM: o.TPM, Burst: o.Burst, Rate: o.Rate, Backlog: o.Backlog}
	if o.MaxWait != nil {
		j.MaxWait = o.MaxWait.String()
	}
	return j
}

// jsonRate maps an unpaced (+Inf) rate to -1: JSON has no infinity.
func jsonRate(r float64) float64 {
	if math.IsInf(r, 1) {
		return -1
	}
	return r
}

// patch applies a PUT body to an existing override: a field present with
// a value replaces it, a field present as null removes it, an absent field
// is kept. Each value is checked here so that the 400 names its field.
func patch(o policy.Override, fields map[string]json.RawMessage) (policy.Override, *apiError) {
	for _, name := range overrideFields { // fixed order: the first bad field is the one reported
		raw, ok := fields[name]
		if !ok {
			continue
		}
		null := string(raw) == "null"
		var err *apiError
		switch name {
		case "rpm":
			o.RPM, err = intField(name, raw, null)
		case "tpm":
			o.TPM, err = intField(name, raw, null)
		case "burst":
			o.Burst, err = intField(name, raw, null)
		case "rate":
			o.Rate, err = rateField(raw, null)
		case "backlog":
			var v *int64
			v, err = intField(name, raw, null)
			o.Backlog = nil
			if v != nil {
				b := int(*v)
				o.Backlog = &b
			}
		case "max_wait":
			o.MaxWait, err = durationField(raw, null)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

func intField(name string, raw json.RawMessage, null bool) (*int64, *apiError) {
	if null {
		return nil, nil
	}
	var v int64
	if err := json.Unmarshal(raw, &v); err != nil || v < 0 || v > math.MaxInt32 {
		return nil, badField(name, "must be an integer >= 0 and <= %d, got %s", math.MaxInt32, raw)
	}
	return &v, nil
}

func rateField(raw json.RawMessage, null bool) (*float64, *apiError) {
	if null {
		return nil, nil
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil || !(v > 0) || v > 1e9 {
		return nil, badField("rate", "must be a number > 0 (requests/s), got %s", raw)
	}
	return &v, nil
}

func durationField(raw json.RawMessage, null bool) (*time.Duration, *apiError) {
	if null {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, badField("max_wait", "must be a duration string such as \"30s\", got %s", raw)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return nil, badField("max_wait", "must be a duration > 0 such as \"30s\", got %q", s)
	}
	return &d, nil
}

// tenantLimits returns tenant id's live tenant-level limits: the
// configured ones with the tenant override on top (bucket overrides and
// model sections are not included).
func tenantLimits(t *policy.Table, id string) policy.Limits {
	l := t.Quotas().TenantLimits(id)
	_, tenants := t.Overrides()
	o := tenants[id]
	return o.Apply(l)
}
