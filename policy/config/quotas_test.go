package config

import (
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
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
	b := BandsSpec{High: BandSpec{time.Second}, Normal: BandSpec{2 * time.Second}}
	for _, c := range []struct {
		p    policy.Priority
		want time.Duration
	}{{policy.PriorityHigh, time.Second}, {policy.PriorityNormal, 2 * time.Second}, {policy.PriorityLow, 0}} {
		if got := b.MaxWait(c.p); got != c.want {
			t.Errorf("MaxWait(%v) = %v, want %v", c.p, got, c.want)
		}
	}
}
