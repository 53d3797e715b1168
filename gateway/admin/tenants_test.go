package admin

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/policy"
)

func TestTenantOverride(t *testing.T) {
	f := newFixture(t)
	f.expect(http.MethodGet, "/admin/tenants/acme", "", 200,
		`{"id":"acme","priority":"normal","weight":1,"limits":{"rpm":600,"tpm":0,"burst":0,"rate":2,"backlog":100,"max_wait":"30s"},"override":{}}`)
	f.expect(http.MethodPut, "/admin/tenants/acme", `{"rpm":1200,"tpm":50000,"rate":4,"backlog":10,"max_wait":"1m"}`, 200,
		`{"id":"acme","priority":"normal","weight":1,"limits":{"rpm":1200,"tpm":50000,"burst":0,"rate":4,"backlog":10,"max_wait":"1m0s"},"override":{"rpm":1200,"tpm":50000,"rate":4,"backlog":10,"max_wait":"1m0s"}}`)
	if got := f.table.Limits(policy.Key{Tenant: "acme", Model: "small"}); got.RPM != 1200 || got.Rate != 4 {
		t.Fatalf("Limits = %+v", got)
	}
	f.expect(http.MethodGet, "/admin/tenants/a/b", "", 200, // the whole rest is the tenant id
		`{"id":"a/b","priority":"normal","weight":1,"limits":{"rpm":0,"tpm":0,"burst":0,"rate":2,"backlog":100,"max_wait":"30s"},"override":{}}`)
	f.expect(http.MethodDelete, "/admin/tenants/acme", "", 200,
		`{"id":"acme","priority":"normal","weight":1,"limits":{"rpm":600,"tpm":0,"burst":0,"rate":2,"backlog":100,"max_wait":"30s"},"override":{}}`)
	f.expect(http.MethodPut, "/admin/tenants/ghost", `{"rpm":1}`, 404,
		`{"error":{"message":"Unknown tenant 'ghost'.","type":"invalid_request_error","param":"tenant","code":"tenant_not_found"}}`)
	f.expect(http.MethodPut, "/admin/tenants/acme", `{"backlog":1.5}`, 400,
		`{"error":{"message":"backlog: must be an integer >= 0 and <= 2147483647, got 1.5","type":"invalid_request_error","param":"backlog","code":null}}`)
}

// TestOverridesSurviveReload: a runtime change outlives a config reload
// unless the new config changes that same value.
func TestOverridesSurviveReload(t *testing.T) {
	f := newFixture(t)
	f.expect(http.MethodPut, "/admin/buckets/acme/small", `{"rate":7,"burst":3}`, 200,
		`{"tenant":"acme","model":"small","backlog":0,"rate":7,"effective_rate":7,"state":"idle","oldest_wait_ms":0,"released":0,"suspends":0,"service":0,"share":0,`+
			`"priority":"normal","weight":1,"limits":{"rpm":600,"tpm":0,"burst":3,"rate":7,"backlog":100,"max_wait":"30s"},"override":{"burst":3,"rate":7}}`)
	f.expect(http.MethodPut, "/admin/tenants/vip", `{"rpm":100,"tpm":9}`, 200,
		`{"id":"vip","priority":"high","weight":1,"limits":{"rpm":100,"tpm":9,"burst":0,"rate":2,"backlog":100,"max_wait":"30s"},"override":{"rpm":100,"tpm":9}}`)

	// Same config reloaded: everything stays.
	reload(t, f.table, testConfig)
	if l := f.table.Limits(policy.Key{Tenant: "acme", Model: "small"}); l.Rate != 7 || l.Burst != 3 {
		t.Fatalf("after an identical reload: %+v", l)
	}
	// The config now sets the default rate to 5 and vip's tpm: those
	// fields follow the file, the others keep the override.
	changed := strings.Replace(testConfig, "rate: 2,", "rate: 5,", 1)
	changed = strings.Replace(changed, "priority: high", "priority: high\n    limits: {tpm: 1000}", 1)
	reload(t, f.table, changed)
	f.expect(http.MethodGet, "/admin/buckets/acme/small", "", 200,
		`{"tenant":"acme","model":"small","backlog":0,"rate":5,"effective_rate":5,"state":"idle","oldest_wait_ms":0,"released":0,"suspends":0,"service":0,"share":0,`+
			`"priority":"normal","weight":1,"limits":{"rpm":600,"tpm":0,"burst":3,"rate":5,"backlog":100,"max_wait":"30s"},"override":{"burst":3}}`)
	f.expect(http.MethodGet, "/admin/tenants/vip", "", 200,
		`{"id":"vip","priority":"high","weight":1,"limits":{"rpm":100,"tpm":1000,"burst":0,"rate":5,"backlog":100,"max_wait":"30s"},"override":{"rpm":100}}`)
}

func reload(t *testing.T, table *policy.Table, y string) {
	t.Helper()
	q, err := parseConfig(t, y).Quotas()
	if err != nil {
		t.Fatal(err)
	}
	table.Reload(q)
}
