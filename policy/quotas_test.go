package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy/config"
)

const minimalYAML = `
listen: "127.0.0.1:8080"
upstreams:
  - url: http://127.0.0.1:8000
defaults: {rpm: 600, tpm: 200000, burst: 20, rate: 5, backlog: 1000, max_wait: 30s}
orgs: [{id: acme-corp, rpm: 3, tpm: 1000}]
tenants:
  - id: acme
    org: acme-corp
    keys: ["sk-acme-1"]
    limits: {rate: 10}
    models:
      llama-3-8b: {rpm: 1200, rate: 20}
  - id: beta
    org: acme-corp
    priority: high
    keys: ["sha256:%s"]
`

func quotasFrom(t *testing.T, yaml string) *Quotas {
	t.Helper()
	f, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewQuotas(f)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func minimalQuotas(t *testing.T) *Quotas {
	sum := sha256.Sum256([]byte("sk-beta"))
	return quotasFrom(t, fmt.Sprintf(minimalYAML, hex.EncodeToString(sum[:])))
}

func TestQuotasLimitsPrecedence(t *testing.T) {
	q := minimalQuotas(t)
	for _, c := range []struct {
		k    Key
		want Limits
	}{
		{Key{"acme", "llama-3-8b"}, Limits{1200, 200000, 20, 20, 1000, 30 * time.Second}}, // model > tenant > defaults
		{Key{"acme", "other"}, Limits{600, 200000, 20, 10, 1000, 30 * time.Second}},       // tenant > defaults
		{Key{"nobody", "llama-3-8b"}, Limits{600, 200000, 20, 5, 1000, 30 * time.Second}}, // unknown tenant
	} {
		if got := q.Limits(c.k); got != c.want {
			t.Errorf("Limits(%v) = %+v, want %+v", c.k, got, c.want)
		}
	}
	if got := q.OrgLimits("acme-corp"); got.RPM != 3 || got.TPM != 1000 {
		t.Errorf("OrgLimits = %+v", got)
	}
	if got := q.OrgLimits(""); got != (Limits{}) {
		t.Errorf("no org: %+v", got)
	}
}

func TestQuotasAuthenticate(t *testing.T) {
	q := minimalQuotas(t)
	for _, c := range []struct {
		key, want string
	}{{"sk-acme-1", "acme"}, {"sk-beta", "beta"}, {"sk-acme-2", ""}, {"", ""}, {"sha256:" + hexSum("sk-beta"), ""}} {
		tn, ok := q.Authenticate(c.key)
		if got := ""; ok {
			got = tn.ID
			if got != c.want {
				t.Errorf("Authenticate(%q) = %q, want %q", c.key, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("Authenticate(%q) failed, want %q", c.key, c.want)
		}
	}
	ts := q.Tenants()
	if len(ts) != 2 || ts[0].ID != "acme" || ts[1].ID != "beta" || ts[1].Priority != PriorityHigh {
		t.Errorf("Tenants() = %v", ts)
	}
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func ptr[T any](v T) *T { return &v }

func TestTableOverrides(t *testing.T) {
	tab := NewTable(minimalQuotas(t))
	k := Key{"acme", "llama-3-8b"}
	if err := tab.SetTenantOverride("acme", Override{Rate: ptr(7.0), Backlog: ptr(5)}); err != nil {
		t.Fatal(err)
	}
	if err := tab.SetBucketOverride(k, Override{Rate: ptr(9.0)}); err != nil {
		t.Fatal(err)
	}
	if l := tab.Limits(k); l.Rate != 9 || l.Backlog != 5 || l.RPM != 1200 {
		t.Errorf("bucket > tenant > config: %+v", l)
	}
	if l := tab.Limits(Key{"acme", "other"}); l.Rate != 7 {
		t.Errorf("tenant override: %+v", l)
	}
	if r, high := tab.BaseRate(Key{"beta", "x"}); r != 5 || !high {
		t.Errorf("BaseRate(beta) = %v, %v", r, high)
	}
	for _, c := range []struct {
		o    Override
		want string
	}{
		{Override{Rate: ptr(0.0)}, "rate: must be > 0"},
		{Override{RPM: ptr(int64(-1))}, "rpm: must be >= 0"},
		{Override{Burst: ptr(int64(-1))}, "burst: must be >= 0"},
		{Override{MaxWait: ptr(time.Duration(0))}, "max_wait: must be > 0"},
		{Override{Backlog: ptr(-1)}, "backlog: must be >= 0"},
	} {
		if err := tab.SetBucketOverride(k, c.o); err == nil || err.Error() != c.want {
			t.Errorf("SetBucketOverride(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
	if err := tab.SetTenantOverride("ghost", Override{Rate: ptr(1.0)}); err == nil || err.Error() != `tenant: unknown tenant "ghost"` {
		t.Errorf("unknown tenant: %v", err)
	}
	b, tn := tab.Overrides()
	if len(b) != 1 || len(tn) != 1 || *b[k].Rate != 9 {
		t.Errorf("Overrides() = %v, %v", b, tn)
	}
	delete(b, k)                                                 // a copy: the table is unchanged
	if err := tab.SetBucketOverride(k, Override{}); err != nil { // the zero Override removes
		t.Fatal(err)
	}
	if b, _ := tab.Overrides(); len(b) != 0 {
		t.Errorf("zero override kept: %v", b)
	}
}

func TestTableReloadOverrideSurvival(t *testing.T) {
	const v1 = `
upstreams: [{url: http://127.0.0.1:8000}]
defaults: {rpm: 600, rate: 5}
tenants:
  - id: acme
    keys: [k1]
    limits: {rate: 10, burst: 3}
    models:
      m: {rpm: 100}
  - id: gone
    keys: [k2]
`
	const v2 = `
upstreams: [{url: http://127.0.0.1:8000}]
defaults: {rpm: 600, rate: 5}
tenants:
  - id: acme
    keys: [k1]
    limits: {rate: 12, burst: 3}
    models:
      m: {rpm: 100}
`
	tab := NewTable(quotasFrom(t, v1))
	k := Key{"acme", "m"}
	must(t, tab.SetBucketOverride(k, Override{Rate: ptr(50.0), RPM: ptr(int64(7))}))
	must(t, tab.SetTenantOverride("acme", Override{Rate: ptr(40.0), Burst: ptr(int64(9))}))
	must(t, tab.SetTenantOverride("gone", Override{Rate: ptr(1.0)}))
	tab.Reload(quotasFrom(t, v2))
	b, tn := tab.Overrides()
	// rate changed in config (10 -> 12): both rate overrides yield;
	// rpm and burst did not change: their overrides survive.
	if o := b[k]; o.Rate != nil || o.RPM == nil || *o.RPM != 7 {
		t.Errorf("bucket override after reload: %+v", o)
	}
	if o := tn["acme"]; o.Rate != nil || o.Burst == nil || *o.Burst != 9 {
		t.Errorf("tenant override after reload: %+v", o)
	}
	if _, ok := tn["gone"]; ok {
		t.Error("an override of a removed tenant survived")
	}
	if l := tab.Limits(k); l.Rate != 12 || l.RPM != 7 || l.Burst != 9 {
		t.Errorf("live limits after reload: %+v", l)
	}
	// An override whose every field yields disappears.
	must(t, tab.SetBucketOverride(k, Override{Rate: ptr(50.0)}))
	tab.Reload(quotasFrom(t, v1))
	if b, _ := tab.Overrides(); len(b) != 0 {
		t.Errorf("emptied override kept: %v", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
