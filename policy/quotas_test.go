package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"testing"
	"time"
)

// digests returns the SHA-256 digests of API keys.
func digests(keys ...string) [][32]byte {
	ds := make([][32]byte, len(keys))
	for i, k := range keys {
		ds[i] = sha256.Sum256([]byte(k))
	}
	return ds
}

func mustQuotas(t testing.TB, defaults Limits, orgs map[string]Limits, tenants ...TenantSpec) *Quotas {
	t.Helper()
	q, err := NewQuotas(defaults, orgs, tenants)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// minimalDefaults: rpm 600, tpm 200000, burst 20, rate 5, backlog 1000,
// max_wait 30s.
var minimalDefaults = Limits{600, 200000, 20, 5, 1000, 30 * time.Second}

// with returns l with Rate and, when rpm > 0, RPM replaced.
func with(l Limits, rpm int64, rate float64) Limits {
	if rpm > 0 {
		l.RPM = rpm
	}
	l.Rate = rate
	return l
}

// minimalQuotas: acme (org acme-corp, rate 10, llama-3-8b at rpm 1200
// and rate 20) and beta (high priority, key given as a digest).
func minimalQuotas(t *testing.T) *Quotas {
	acme := with(minimalDefaults, 0, 10)
	return mustQuotas(t, minimalDefaults, map[string]Limits{"acme-corp": {RPM: 3, TPM: 1000}},
		TenantSpec{ID: "acme", Org: "acme-corp", Keys: digests("sk-acme-1"), Limits: acme,
			Models: map[string]Limits{"llama-3-8b": with(acme, 1200, 20)}},
		TenantSpec{ID: "beta", Org: "acme-corp", Priority: PriorityHigh, Keys: digests("sk-beta"), Limits: minimalDefaults})
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
	defaults := Limits{RPM: 600, Rate: 5, Backlog: 1000, MaxWait: 30 * time.Second}
	version := func(rate float64, gone bool) *Quotas {
		acme := defaults
		acme.Rate, acme.Burst = rate, 3
		m := acme
		m.RPM = 100
		ts := []TenantSpec{{ID: "acme", Keys: digests("k1"), Limits: acme, Models: map[string]Limits{"m": m}}}
		if gone {
			ts = append(ts, TenantSpec{ID: "gone", Keys: digests("k2"), Limits: defaults})
		}
		return mustQuotas(t, defaults, nil, ts...)
	}
	v1, v2 := version(10, true), version(12, false)
	tab := NewTable(v1)
	k := Key{"acme", "m"}
	must(t, tab.SetBucketOverride(k, Override{Rate: ptr(50.0), RPM: ptr(int64(7))}))
	must(t, tab.SetTenantOverride("acme", Override{Rate: ptr(40.0), Burst: ptr(int64(9))}))
	must(t, tab.SetTenantOverride("gone", Override{Rate: ptr(1.0)}))
	tab.Reload(v2)
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
	tab.Reload(v1)
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

func TestNewQuotasRejects(t *testing.T) {
	ok := TenantSpec{ID: "a", Keys: digests("k1")}
	for _, c := range []struct {
		name    string
		tenants []TenantSpec
		want    string
	}{
		{"empty id", []TenantSpec{{}}, `policy: tenant "": id: required`},
		{"bad org", []TenantSpec{{ID: "a", Org: "x\ny"}}, `policy: tenant "a": org: contains a control character: "x\ny"`},
		{"bad model", []TenantSpec{{ID: "a", Models: map[string]Limits{"ok": {}, "": {}}}}, `policy: tenant "a": model "": required`},
		{"priority", []TenantSpec{{ID: "a", Priority: 9}}, `policy: tenant "a": unknown priority 9`},
		{"duplicate id", []TenantSpec{ok, {ID: "a"}}, `policy: tenant "a": duplicate tenant id`},
		{"negative weight", []TenantSpec{{ID: "a", Weight: -1}}, `policy: tenant "a": weight -1: must be finite and > 0`},
		{"NaN weight", []TenantSpec{{ID: "a", Weight: math.NaN()}}, `policy: tenant "a": weight NaN: must be finite and > 0`},
		{"infinite weight", []TenantSpec{{ID: "a", Weight: math.Inf(1)}}, `policy: tenant "a": weight +Inf: must be finite and > 0`},
		{"duplicate key", []TenantSpec{ok, {ID: "b", Keys: digests("k2", "k1")}}, `policy: tenant "b": keys[1]: duplicate API key`},
	} {
		if _, err := NewQuotas(Limits{}, nil, c.tenants); err == nil || err.Error() != c.want {
			t.Errorf("%s: err = %v, want %s", c.name, err, c.want)
		}
	}
}

func TestNewQuotasCopiesItsArguments(t *testing.T) {
	orgs := map[string]Limits{"o": {RPM: 1}}
	models := map[string]Limits{"m": {RPM: 2}}
	q := mustQuotas(t, Limits{}, orgs, TenantSpec{ID: "a", Org: "o", Models: models})
	orgs["o"], models["m"] = Limits{RPM: 10}, Limits{RPM: 20}
	if q.OrgLimits("o").RPM != 1 || q.Limits(Key{"a", "m"}).RPM != 2 {
		t.Fatalf("Quotas changed with its arguments: org %+v, model %+v", q.OrgLimits("o"), q.Limits(Key{"a", "m"}))
	}
}

func TestCheckModelName(t *testing.T) {
	for name, want := range map[string]string{
		"meta-llama/Llama-3-8B":            "",
		"":                                 "required",
		string(make([]byte, MaxNameLen+1)): "longer than 128 bytes",
		"\xff":                             "not valid UTF-8",
		"a\tb":                             `contains a control character: "a\tb"`,
	} {
		got := ""
		if err := CheckModelName(name); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("CheckModelName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestNewQuotasWeightAndPriority(t *testing.T) {
	q := mustQuotas(t, Limits{}, nil,
		TenantSpec{ID: "a"},
		TenantSpec{ID: "b", Priority: PriorityLow, Weight: 2.5})
	a, _ := q.Tenant("a")
	b, _ := q.Tenant("b")
	if a.Weight != 1 || a.Priority != PriorityNormal || b.Weight != 2.5 || b.Priority != PriorityLow {
		t.Fatalf("a %+v, b %+v: want weight 1 (the default) normal, 2.5 low", a, b)
	}
}

func TestPriorityBands(t *testing.T) {
	for _, c := range []struct {
		p    Priority
		name string
		band int
	}{{PriorityHigh, "high", 0}, {PriorityNormal, "normal", 1}, {PriorityLow, "low", 2}, {7, "Priority(7)", 1}} {
		if c.p.String() != c.name || c.p.Band() != c.band {
			t.Errorf("%d: String %q Band %d, want %q %d", c.p, c.p.String(), c.p.Band(), c.name, c.band)
		}
	}
	var zero Priority
	if zero != PriorityNormal || PriorityLow.Band() != NumBands-1 {
		t.Errorf("zero value %v, low band %d of %d", zero, PriorityLow.Band(), NumBands)
	}
}
