package config

import (
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
	"go.yaml.in/yaml/v3"
)

func TestFileQuotas(t *testing.T) {
	f, err := Parse(mustRead(t, "valid/minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		k    policy.Key
		want policy.Limits
	}{
		{policy.Key{Tenant: "acme", Model: "llama-3-8b"}, policy.Limits{RPM: 1200, TPM: 200000, Burst: 20, Rate: 20, Backlog: 1000, MaxWait: 30 * time.Second}}, // model > tenant > defaults
		{policy.Key{Tenant: "acme", Model: "other"}, policy.Limits{RPM: 600, TPM: 200000, Burst: 20, Rate: 10, Backlog: 1000, MaxWait: 30 * time.Second}},       // tenant > defaults
		{policy.Key{Tenant: "nobody", Model: "llama-3-8b"}, policy.Limits{RPM: 600, TPM: 200000, Burst: 20, Rate: 5, Backlog: 1000, MaxWait: 30 * time.Second}}, // unknown tenant
	} {
		if got := q.Limits(c.k); got != c.want {
			t.Errorf("Limits(%v) = %+v, want %+v", c.k, got, c.want)
		}
	}
	if tn, ok := q.Authenticate("sk-acme-1"); !ok || tn.ID != "acme" || tn.Org != "acme-corp" || tn.Priority != policy.PriorityNormal || tn.Weight != 1 {
		t.Errorf("Authenticate(sk-acme-1) = %+v, %v", tn, ok)
	}
}

func TestFileQuotasKeysAndOrgs(t *testing.T) {
	f, err := Parse(mustRead(t, "valid/full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	// The sha256: entry is the digest of "password".
	if tn, ok := q.Authenticate("password"); !ok || tn.ID != "acme" || tn.Priority != policy.PriorityHigh {
		t.Errorf("Authenticate(password) = %+v, %v", tn, ok)
	}
	if tn, ok := q.Authenticate("sk-solo"); !ok || tn.Priority != policy.PriorityLow || tn.Weight != 0.5 {
		t.Errorf("Authenticate(sk-solo) = %+v, %v; want low priority, weight 0.5", tn, ok)
	}
	if o := q.OrgLimits("acme-corp"); o.RPM != 5000 || o.TPM != 1000000 {
		t.Errorf("OrgLimits = %+v", o)
	}
}

func TestFileQuotasValidates(t *testing.T) {
	f := &File{Upstreams: []Upstream{{URL: "http://x:1"}}, Tenants: []TenantSpec{{ID: "a", Keys: []string{""}}}}
	f.SetDefaults()
	if _, err := f.Quotas(); err == nil || err.Error() != "tenants[0].keys[0]: must not be empty" {
		t.Fatalf("Quotas() = %v, want the validation error", err)
	}
}

func TestBandsMaxWait(t *testing.T) {
	b := BandsSpec{High: BandSpec{MaxWait: time.Second}, Normal: BandSpec{MaxWait: 2 * time.Second}}
	for _, c := range []struct {
		p    policy.Priority
		want time.Duration
	}{{policy.PriorityHigh, time.Second}, {policy.PriorityNormal, 2 * time.Second}, {policy.PriorityLow, 0}} {
		if got := b.MaxWait(c.p); got != c.want {
			t.Errorf("MaxWait(%v) = %v, want %v", c.p, got, c.want)
		}
	}
}

// A limit set in the file and the same limit set at runtime through an
// override resolve alike: tenant limits vs a tenant override, a model
// section vs a bucket override, field by field and all at once.
func TestFileAndOverrideResolveAlike(t *testing.T) {
	const base = "upstreams: [{url: \"http://127.0.0.1:1\"}]\n" +
		"defaults: {rpm: 60, tpm: 1000, burst: 5, rate: 2, backlog: 10, max_wait: 5s}\n"
	k := policy.Key{Tenant: "acme", Model: "m"}
	for _, c := range []struct{ yaml, field string }{
		{"rpm: 7", "rpm"}, {"tpm: 70", "tpm"}, {"burst: 0", "burst"}, {"rate: .inf", "rate"},
		{"backlog: 3", "backlog"}, {"max_wait: 9s", "max_wait"},
		{"rpm: 7, tpm: 70, burst: 0, rate: 0.5, backlog: 3, max_wait: 9s", "all"},
	} {
		var spec LimitsSpec
		if err := yaml.Unmarshal([]byte("{"+c.yaml+"}"), &spec); err != nil {
			t.Fatal(err)
		}
		inFile := func(section string) policy.Limits {
			t.Helper()
			return table(t, base+"tenants: [{id: acme, keys: [k], "+section+"}]\n").Limits(k)
		}
		plain := table(t, base+"tenants: [{id: acme, keys: [k]}]\n")
		if err := plain.SetTenantOverride("acme", spec.override()); err != nil {
			t.Fatal(err)
		}
		if got, want := plain.Limits(k), inFile("limits: {"+c.yaml+"}"); got != want || got == plain.Quotas().Limits(k) {
			t.Errorf("%s: tenant override %+v, tenant limits in the file %+v", c.field, got, want)
		}
		plain = table(t, base+"tenants: [{id: acme, keys: [k]}]\n")
		if err := plain.SetBucketOverride(k, spec.override()); err != nil {
			t.Fatal(err)
		}
		if got, want := plain.Limits(k), inFile("models: {m: {"+c.yaml+"}}"); got != want {
			t.Errorf("%s: bucket override %+v, model section in the file %+v", c.field, got, want)
		}
	}
}

// A value the file refuses is refused as an override too, with the same
// rule: policy checks both.
func TestFileAndOverrideValidateAlike(t *testing.T) {
	for _, c := range []struct{ yaml, problem string }{
		{"rpm: -1", "rpm: must be >= 0"}, {"rate: 0", "rate: must be > 0"},
		{"backlog: -2", "backlog: must be >= 0"}, {"max_wait: 0s", "max_wait: must be > 0"},
	} {
		_, err := Parse([]byte("upstreams: [{url: \"http://127.0.0.1:1\"}]\ntenants: [{id: acme, keys: [k], limits: {" + c.yaml + "}}]\n"))
		if err == nil || err.Error() != "tenants[0].limits."+c.problem {
			t.Errorf("%s in the file: %v, want tenants[0].limits.%s", c.yaml, err, c.problem)
		}
		var spec LimitsSpec
		if err := yaml.Unmarshal([]byte("{"+c.yaml+"}"), &spec); err != nil {
			t.Fatal(err)
		}
		tab := table(t, "upstreams: [{url: \"http://127.0.0.1:1\"}]\ntenants: [{id: acme, keys: [k]}]\n")
		if err := tab.SetTenantOverride("acme", spec.override()); err == nil || err.Error() != c.problem {
			t.Errorf("%s as an override: %v, want %s", c.yaml, err, c.problem)
		}
	}
}

func table(t *testing.T, file string) *policy.Table {
	t.Helper()
	f, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	return policy.NewTable(q)
}
