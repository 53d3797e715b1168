package policy

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// admitQuotas: org corp (rpm 4, tpm 100000) binds acme (rpm 1000, tpm
// 1000; model "burst" at rpm 60 with burst 2, model "slow" at rpm 2) and
// beta (defaults); solo (rpm 100, tpm 500) has no org. The defaults are
// rate 100 with no caps.
func admitQuotas(t testing.TB) *Quotas {
	d := Limits{Rate: 100, Backlog: 1000, MaxWait: 30 * time.Second}
	acme, solo := d, d
	acme.RPM, acme.TPM = 1000, 1000
	solo.RPM, solo.TPM = 100, 500
	burst, slow := acme, acme
	burst.RPM, burst.Burst = 60, 2
	slow.RPM = 2
	return mustQuotas(t, d, map[string]Limits{"corp": {RPM: 4, TPM: 100000}},
		TenantSpec{ID: "acme", Org: "corp", Keys: digests("k1"), Limits: acme,
			Models: map[string]Limits{"burst": burst, "slow": slow}},
		TenantSpec{ID: "beta", Org: "corp", Keys: digests("k2"), Limits: d},
		TenantSpec{ID: "solo", Keys: digests("k3"), Limits: solo})
}

// newTestAdmitter returns an admitter over admitQuotas at t0+at. It must
// be called in a synctest bubble, whose clock starts on a minute boundary
// as t0 is, so that at is the time into the first minute.
func newTestAdmitter(t *testing.T, at time.Duration) (*Admitter, *Table) {
	t.Helper()
	time.Sleep(at)
	tab := NewTable(admitQuotas(t))
	return NewAdmitter(tab), tab
}

func tenant(t *testing.T, tab *Table, id string) *Tenant {
	t.Helper()
	tn, ok := tab.Tenant(id)
	if !ok {
		t.Fatalf("no tenant %q", id)
	}
	return tn
}

// assertRetryExact checks that a denial's RetryAfter is exactly when the
// same call passes: denied 1ns before, admitted at it.
func assertRetryExact(t *testing.T, a *Admitter, tn *Tenant, model string, est int64, d Admission) {
	t.Helper()
	if d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("want a denial with RetryAfter, got %+v", d)
	}
	time.Sleep(d.RetryAfter - 1)
	if early := a.Admit(tn, model, est); early.Allowed {
		t.Fatalf("admitted 1ns before RetryAfter %v", d.RetryAfter)
	}
	time.Sleep(1)
	if at := a.Admit(tn, model, est); !at.Allowed {
		t.Fatalf("denied at RetryAfter %v: %+v", d.RetryAfter, at)
	}
}

func TestAdmitterWindowsAndHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tab := newTestAdmitter(t, 15*time.Second)
		d := a.Admit(tenant(t, tab, "solo"), "m", 200)
		if !d.Allowed || d.Reason != ReasonOK {
			t.Fatalf("%+v", d)
		}
		if d.Requests != (Window{100, 99, 45 * time.Second}) || d.Tokens != (Window{500, 300, 45 * time.Second}) {
			t.Fatalf("windows: %+v %+v", d.Requests, d.Tokens)
		}
		if d.Reservation.burst {
			t.Fatal("a burst token was spent with burst 0")
		}
	})
}

func TestAdmitterTPMReservationPreventsOvershoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tab := newTestAdmitter(t, 0)
		tn := tenant(t, tab, "solo") // tpm 500, no org
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if a.Admit(tn, "m", 100).Allowed {
					allowed.Add(1)
				}
			})
		}
		wg.Wait()
		if allowed.Load() != 5 {
			t.Fatalf("%d admitted at 100 tokens each under TPM 500, want 5", allowed.Load())
		}
	})
}

func TestAdmitterReconcileAndRefund(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tab := newTestAdmitter(t, 50*time.Second)
		tn := tenant(t, tab, "solo")
		k := Key{"solo", "m"}
		used := func() int64 { c, _ := a.tok.UsageAt(time.Now(), k); return c }

		d := a.Admit(tn, "m", 300)
		a.Reconcile(d.Reservation, 100) // same window: charge 100 instead of 300
		if used() != 100 {
			t.Fatalf("after reconcile in window: %d, want 100", used())
		}
		d = a.Admit(tn, "m", 300)
		time.Sleep(15 * time.Second)    // next minute
		a.Reconcile(d.Reservation, 500) // the excess over the reservation lands in the new window
		if used() != 200 {
			t.Fatalf("after reconcile across windows: %d, want 200", used())
		}

		d = a.Admit(tn, "m", 250)
		a.Refund(d.Reservation)
		if used() != 200 {
			t.Fatalf("after refund: %d, want 200", used())
		}
		if c, _ := a.req.UsageAt(time.Now(), k); c != 0 {
			t.Fatalf("requests after refund: %d, want 0", c)
		}
	})
}

func TestAdmitterRefundReturnsBurstAndRPMSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tab := newTestAdmitter(t, 0)
		tn := tenant(t, tab, "acme")
		first := a.Admit(tn, "burst", 0) // no tokens: the org TPM window is not touched
		if !first.Allowed || !a.Admit(tn, "burst", 0).Allowed {
			t.Fatal("burst of 2 not admitted")
		}
		if a.Admit(tn, "burst", 0).Allowed {
			t.Fatal("third admitted with burst 2")
		}
		a.Refund(first.Reservation)
		if d := a.Admit(tn, "burst", 0); !d.Allowed {
			t.Fatalf("refunded burst token not reusable: %+v", d)
		}
	})
}

func TestAdmitterOrgCapBindsTenants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tab := newTestAdmitter(t, 20*time.Second)
		acme, beta := tenant(t, tab, "acme"), tenant(t, tab, "beta")
		for i, tn := range []*Tenant{acme, beta, acme, beta} {
			if d := a.Admit(tn, "m", 10); !d.Allowed {
				t.Fatalf("request %d denied: %+v", i, d)
			}
		}
		d := a.Admit(beta, "m", 10)
		if d.Reason != ReasonOrgRPM || d.Reason.Kind() != "requests" || d.RetryAfter != 40*time.Second {
			t.Fatalf("5th request of org with rpm 4: %+v", d)
		}
		assertRetryExact(t, a, acme, "m", 10, d)
	})
}

func TestAdmitterDenialRefundsEarlierReservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tab := newTestAdmitter(t, 0)
		tn := tenant(t, tab, "acme")
		orgKey := Key{Tenant: "corp"}
		// 2000 tokens exceed the whole TPM of 1000: let in alone into the
		// empty window, which is now over its cap.
		if d := a.Admit(tn, "m", 2000); !d.Allowed {
			t.Fatalf("oversized first request: %+v", d)
		}
		before, _ := a.orgTok.UsageAt(time.Now(), orgKey)
		reqBefore, _ := a.orgReq.UsageAt(time.Now(), orgKey)
		d := a.Admit(tn, "m", 10)
		if d.Reason != ReasonTPM || d.Reason.Kind() != "tokens" {
			t.Fatalf("want TPM_LIMIT, got %+v", d)
		}
		after, _ := a.orgTok.UsageAt(time.Now(), orgKey)
		reqAfter, _ := a.orgReq.UsageAt(time.Now(), orgKey)
		if after != before || reqAfter != reqBefore {
			t.Fatalf("org windows kept a denied request's reservation: tokens %d->%d, requests %d->%d",
				before, after, reqBefore, reqAfter)
		}
	})
}

func TestAdmitterRetryAfterExact(t *testing.T) {
	t.Run("burst", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, tab := newTestAdmitter(t, 5*time.Second)
			tn := tenant(t, tab, "acme")
			a.Admit(tn, "burst", 1)
			a.Admit(tn, "burst", 1)
			d := a.Admit(tn, "burst", 1)
			if d.Reason != ReasonBurst || d.RetryAfter != time.Second { // 60 rpm refills one per second
				t.Fatalf("%+v", d)
			}
			assertRetryExact(t, a, tn, "burst", 1, d)
		})
	})
	t.Run("tpm", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, tab := newTestAdmitter(t, 5*time.Second)
			tn := tenant(t, tab, "solo")
			a.Admit(tn, "m", 450)
			d := a.Admit(tn, "m", 100)
			if d.Reason != ReasonTPM || d.RetryAfter != 55*time.Second {
				t.Fatalf("%+v", d)
			}
			assertRetryExact(t, a, tn, "m", 100, d)
		})
	})
}

// TestAdmitterRPMIsOneFixedWindow: with rpm 2, two requests
// at :58 and one at 1:01. rpm is a fixed one-minute window, so the third
// request starts a new minute and is admitted; the old second RPM check
// (a sliding log over the same rpm) denied it with RPM_LIMIT while its
// headers said 2 requests remained and Retry-After said 57 s.
func TestAdmitterRPMIsOneFixedWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, tab := newTestAdmitter(t, 58*time.Second)
		tn := tenant(t, tab, "acme")
		for i := range 2 {
			if d := a.Admit(tn, "slow", 1); !d.Allowed {
				t.Fatalf("request %d at :58 denied: %+v", i, d)
			}
		}
		time.Sleep(3 * time.Second) // 1:01
		d := a.Admit(tn, "slow", 1)
		if !d.Allowed || d.Requests != (Window{2, 1, 59 * time.Second}) {
			t.Fatalf("first request of the new minute: %+v, want admitted with 1 of 2 remaining", d)
		}
		a.Admit(tn, "slow", 1)
		d = a.Admit(tn, "slow", 1)
		if d.Allowed || d.Reason != ReasonRPM || d.Requests.Remaining != 0 || d.RetryAfter != d.Requests.Reset {
			t.Fatalf("third request of the minute: %+v, want RPM_LIMIT with 0 remaining, retry at the reset", d)
		}
		assertRetryExact(t, a, tn, "slow", 1, d)
	})
}

// An unpaced bucket (rate +Inf) without an RPM cap refills its burst
// infinitely fast: no burst check, and no bucket state kept for it.
func TestAdmitterUnpacedBurstChecksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Limits{Burst: 2, Rate: math.Inf(1), Backlog: 10, MaxWait: time.Second}
		tab := NewTable(mustQuotas(t, l, nil, TenantSpec{ID: "u", Limits: l}))
		a := NewAdmitter(tab)
		tn := tenant(t, tab, "u")
		for i := range 5 {
			if d := a.Admit(tn, "m", 1); !d.Allowed || d.Reservation.burst {
				t.Fatalf("request %d: %+v, want admitted without spending a burst token", i, d)
			}
		}
		if n := a.burst.Len(); n != 0 {
			t.Fatalf("burst bucket holds %d keys, want 0", n)
		}
	})
}

// A cap window is a wall-clock minute: at its first instant all of it is
// left, and it ends on the minute's turn.
func TestCapWindowLeft(t *testing.T) {
	for _, c := range []struct {
		at   time.Time
		want time.Duration
	}{
		{time.Date(2026, 12, 6, 7, 18, 0, 0, time.UTC), time.Minute},
		{time.Date(2026, 12, 6, 7, 17, 59, 700_000_000, time.UTC), 300 * time.Millisecond},
		{time.Date(2026, 12, 6, 8, 17, 30, 0, time.FixedZone("+01:00", 3600)), 30 * time.Second},
	} {
		if got := CapWindowLeft(c.at); got != c.want {
			t.Errorf("at %v: %v left, want %v", c.at, got, c.want)
		}
	}
}
