package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

func testTable(t *testing.T, lim policy.Limits, org policy.Limits) (*policy.Table, *policy.Tenant) {
	t.Helper()
	orgs := map[string]policy.Limits{}
	spec := policy.TenantSpec{ID: "acme", Limits: lim}
	if org != (policy.Limits{}) {
		orgs["acme-corp"] = org
		spec.Org = "acme-corp"
	}
	q, err := policy.NewQuotas(policy.Limits{Rate: 10}, orgs, []policy.TenantSpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	tb := policy.NewTable(q)
	tn, _ := tb.Tenant("acme")
	return tb, tn
}

// replicas returns n admitters, each on a store of its own, sharing one
// Redis under one prefix: n replicas of one cluster.
func replicaAdmitters(t *testing.T, n int, tb *policy.Table) ([]*Admitter, []*Store) {
	p := testPrefix(t)
	var as []*Admitter
	var ss []*Store
	for range n {
		s := newTestStore(t, p, n)
		ss = append(ss, s)
		as = append(as, NewAdmitter(s, tb))
	}
	return as, ss
}

// TestSharedRPMExact: three replicas, 90 requests round robin under an
// RPM of 30: exactly 30 admitted, the rest denied with RPM_LIMIT and the
// window's reset, at most one round trip per request.
func TestSharedRPMExact(t *testing.T) {
	tb, tn := testTable(t, policy.Limits{RPM: 30, Rate: 10}, policy.Limits{})
	as, ss := replicaAdmitters(t, 3, tb)
	now := time.Now().UnixNano()
	now -= now % int64(time.Minute) // the start of a minute: the test stays in one window
	allowed := 0
	for i := range 90 {
		ad := as[i%3].admitAt(now+int64(i), tn, "m", 0)
		if ad.Allowed {
			allowed++
			continue
		}
		if ad.Reason != policy.ReasonRPM || ad.RetryAfter != time.Duration(int64(time.Minute)-int64(i)) {
			t.Fatalf("request %d: %+v", i, ad)
		}
	}
	if allowed != 30 {
		t.Fatalf("allowed %d of 90 under an RPM of 30 across 3 replicas", allowed)
	}
	var trips uint64
	for _, s := range ss {
		trips += s.Stats().RoundTrips - 1 // less Start's probe
	}
	if trips > 90 {
		t.Fatalf("%d round trips for 90 requests", trips)
	}
}

// TestSharedTPMWithReconcile: token reservations are leased; a request
// that used less gives the rest back to its replica's lease, which the
// next request uses without asking the store again.
func TestSharedTPMWithReconcile(t *testing.T) {
	tb, tn := testTable(t, policy.Limits{TPM: 1000, Rate: 10}, policy.Limits{})
	as, ss := replicaAdmitters(t, 2, tb)
	now := time.Now().UnixNano()
	now -= now % int64(time.Minute)
	a, b := as[0], as[1]
	// 1000/(16·2) = 31 extra: a holds 400+31, b 400+31; 138 left in the store.
	ra := a.admitAt(now, tn, "m", 400)
	rb := b.admitAt(now, tn, "m", 400)
	if !ra.Allowed || !rb.Allowed {
		t.Fatalf("two reservations of 400 under 1000: %+v %+v", ra, rb)
	}
	if d := a.admitAt(now, tn, "m", 300); d.Allowed || d.Reason != policy.ReasonTPM {
		t.Fatalf("a third of 300 with 169 left in leases and store: %+v", d)
	}
	trips := ss[0].Stats().RoundTrips
	a.reconcileAt(now, ra.Reservation.Ext.(*ticket), 100) // used 100 of 400: 300 back to a's lease
	if d := a.admitAt(now, tn, "m", 300); !d.Allowed {
		t.Fatalf("after the saving: %+v", d)
	}
	if got := ss[0].Stats().RoundTrips; got != trips {
		t.Fatalf("the saving was not used from the lease: %d round trips, want %d", got, trips)
	}
	b.Refund(rb.Reservation)
	if d := b.admitAt(now, tn, "m", 431); !d.Allowed {
		t.Fatalf("after the refund b holds 431: %+v", d)
	}
}

// TestSharedBurst: a burst of 4 across two replicas lets 4 through in
// total, then denies with the refill wait.
func TestSharedBurst(t *testing.T) {
	tb, tn := testTable(t, policy.Limits{Burst: 4, Rate: 1}, policy.Limits{})
	as, _ := replicaAdmitters(t, 2, tb)
	now := time.Now().UnixNano()
	allowed := 0
	for i := range 10 {
		ad := as[i%2].admitAt(now, tn, "m", 0)
		if ad.Allowed {
			allowed++
		} else if ad.Reason != policy.ReasonBurst || ad.RetryAfter <= 0 || ad.RetryAfter > time.Second {
			t.Fatalf("request %d: %+v", i, ad)
		}
	}
	if allowed != 4 {
		t.Fatalf("allowed %d under a burst of 4", allowed)
	}
}

// TestOrgCapShared: an org's RPM binds across replicas and names the org
// reason.
func TestOrgCapShared(t *testing.T) {
	tb, tn := testTable(t, policy.Limits{Rate: 10}, policy.Limits{RPM: 5})
	as, _ := replicaAdmitters(t, 3, tb)
	now := time.Now().UnixNano()
	now -= now % int64(time.Minute)
	allowed := 0
	for i := range 12 {
		ad := as[i%3].admitAt(now, tn, "m", 0)
		if ad.Allowed {
			allowed++
		} else if ad.Reason != policy.ReasonOrgRPM {
			t.Fatalf("request %d: %+v", i, ad)
		}
	}
	if allowed != 5 {
		t.Fatalf("allowed %d under an org RPM of 5", allowed)
	}
}

// TestIdleLeaseReturned: a lease unused for LeaseIdle goes back on the
// next tick, so that another replica can use it.
func TestIdleLeaseReturned(t *testing.T) {
	tb, tn := testTable(t, policy.Limits{RPM: 32, Rate: 10}, policy.Limits{})
	as, _ := replicaAdmitters(t, 2, tb)
	now := time.Now().UnixNano()
	now -= now % int64(time.Minute)
	a, b := as[0], as[1]
	if !a.admitAt(now, tn, "m", 0).Allowed { // a leases 1 + 32/32 = 2
		t.Fatal("first request denied")
	}
	for i := range 30 {
		if !b.admitAt(now, tn, "m", 0).Allowed {
			t.Fatalf("b's request %d denied", i)
		}
	}
	if b.admitAt(now, tn, "m", 0).Allowed {
		t.Fatal("b got a unit a holds")
	}
	a.tick(time.Unix(0, now).Add(2*time.Second), true) // a's lease idle for 2 s
	if b.admitAt(now+int64(denyFor)-1, tn, "m", 0).Allowed {
		t.Fatal("b asked the store again within denyFor of its denial")
	}
	if !b.admitAt(now+int64(denyFor), tn, "m", 0).Allowed {
		t.Fatal("a's idle unit did not come back")
	}
	if b.admitAt(now+int64(denyFor), tn, "m", 0).Allowed {
		t.Fatal("more than the cap")
	}
}

// TestUnreachableStoreFallback: a store that is not there at start is
// the documented fallback, not an error: the window the outage began in
// gets nothing beyond what is held, a window that begins during it gets
// cap/N, and the burst bucket capacity/N.
func TestUnreachableStoreFallback(t *testing.T) {
	s := New(Options{Addr: "127.0.0.1:1", Replicas: 3, Prefix: testPrefix(t)})
	s.Start(context.Background())
	defer s.Close()
	if s.Up() || s.Stats().Outages != 1 {
		t.Fatalf("stats %+v, want down after one outage", s.Stats())
	}
	tb, tn := testTable(t, policy.Limits{RPM: 30, Burst: 30, Rate: 10}, policy.Limits{})
	a := NewAdmitter(s, tb)
	now := time.Now().UnixNano()
	if d := a.admitAt(now, tn, "m", 0); d.Allowed || d.Reason != policy.ReasonRPM {
		t.Fatalf("in the outage's own window: %+v, want RPM_LIMIT", d)
	}
	next := (windowOf(now) + 1) * int64(time.Minute)
	allowed := 0
	for i := range 20 {
		if a.admitAt(next+int64(i), tn, "m", 0).Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("allowed %d in a window of the outage, want cap/N = 10", allowed)
	}
	if st := s.Stats(); st.Fallbacks != 21 || st.Requests != 21 {
		t.Fatalf("stats %+v", st)
	}
}
