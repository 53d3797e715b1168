package app

import (
	"testing"

	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

// The README's configuration reference, kept in testdata, is a valid file
// and means what the README says.
func TestExampleConfigParses(t *testing.T) {
	f, err := config.Load("../../testdata/pacegate.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	tenant, ok := q.Authenticate("sk-acme-1")
	if !ok || tenant.ID != "acme" || tenant.Org != "acme-corp" || tenant.Priority != policy.PriorityHigh {
		t.Fatalf("sk-acme-1 → %+v, %v", tenant, ok)
	}
	if l := q.Limits(policy.Key{Tenant: "acme", Model: "llama-3-8b"}); l.RPM != 1200 || l.Rate != 20 {
		t.Errorf("acme/llama-3-8b limits %+v, want rpm 1200 rate 20", l)
	}
	if l := q.OrgLimits("acme-corp"); l.RPM != 5000 || l.TPM != 2000000 {
		t.Errorf("org limits %+v", l)
	}
}
