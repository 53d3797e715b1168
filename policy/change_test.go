package policy

import (
	"testing"
)

func TestChangeMatches(t *testing.T) {
	k := Key{Tenant: "a", Model: "m"}
	cases := []struct {
		c    Change
		want bool
	}{
		{Change{All: true}, true},
		{Change{Key: k}, true},
		{Change{Key: Key{Tenant: "a", Model: "n"}}, false},
		{Change{Tenant: "a"}, true},
		{Change{Tenant: "b"}, false},
		{Change{Model: "m"}, true},
		{Change{Model: "n"}, false},
	}
	for _, tc := range cases {
		if got := tc.c.Matches(k); got != tc.want {
			t.Errorf("%+v.Matches(%v) = %v, want %v", tc.c, k, got, tc.want)
		}
	}
}

// Every rate-changing call tells the listener what it touched, after the
// change is visible.
func TestOnChangeReportsEachChange(t *testing.T) {
	table := NewTable(minimalQuotas(t))
	pacer := NewPacer(table)
	var got []Change
	k := Key{Tenant: "acme", Model: "m"}
	listen := func(c Change) {
		if c.Key == k && table.Limits(k).Rate != 42 {
			t.Errorf("listener ran before the override was visible")
		}
		got = append(got, c)
	}
	table.OnChange(listen)
	pacer.OnChange(listen)
	rate := 42.0
	if err := table.SetBucketOverride(k, Override{Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	if err := table.SetTenantOverride("acme", Override{Rate: &rate}); err != nil {
		t.Fatal(err)
	}
	if err := table.SetTenantOverride("nobody", Override{Rate: &rate}); err == nil {
		t.Fatal("unknown tenant accepted")
	}
	pacer.SetColumnFactor("m", 0.5)
	pacer.SetGlobalFactor(2)
	table.Reload(table.Quotas())
	want := []Change{{Key: k}, {Tenant: "acme"}, {Model: "m"}, {All: true}, {All: true}}
	if len(got) != len(want) {
		t.Fatalf("changes = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
