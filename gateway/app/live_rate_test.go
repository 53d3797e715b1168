package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

const liveRateConfig = `
defaults: {rate: 0.1, backlog: 100, max_wait: 60s}
tenants:
  - {id: acme, keys: [sk-acme]}
`

const (
	slowInterval = 10 * time.Second      // rate 0.1, the configured one
	fastInterval = 20 * time.Millisecond // rate 50
	hangGuard    = time.Minute           // bounds waits; never the assertion
)

// TestQueuedRequestsFollowRateChanges drives the real process: requests
// queue behind a slow pace, a PUT on the admin listener speeds them up,
// another slows the next ones down, and raising the global factor
// releases them. Pace is read from the instants the requests reach the
// model, relative to each other.
func TestQueuedRequestsFollowRateChanges(t *testing.T) {
	ta := startApp(t, fastSim(), liveRateConfig)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, hangGuard, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })

	// 6 requests at 0.1/s: one leaves at once, 5 would need 50 s.
	results := ta.fire(6, "sk-acme")
	eventually(t, hangGuard, "5 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 5 })
	changed := time.Now()
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":50}`); code != 200 {
		t.Fatalf("PUT rate 50: %d %s", code, body)
	}
	receiveOK(t, results, 6)
	at := ta.arrivals()
	if len(at) != 6 {
		t.Fatalf("%d requests reached the model, want 6", len(at))
	}
	checkSpedUp(t, at, 1, changed, slowInterval, fastInterval)

	// Slow down to one per 10 s again: the next requests stay queued.
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":0.1}`); code != 200 {
		t.Fatalf("PUT rate 0.1: %d %s", code, body)
	}
	results = ta.fire(3, "sk-acme")
	eventually(t, hangGuard, "3 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 3 })
	// A look at a queue that must not move: at the previous 50/s all 3
	// would have left within 3 × 20 ms; 1 s is 50 such intervals.
	watch := time.NewTimer(time.Second)
	defer watch.Stop()
	select {
	case r := <-results:
		t.Fatalf("a request was released within 1 s at 0.1/s: %d %s", r.status, r.body)
	case <-watch.C:
	}
	if n, b := len(ta.arrivals()), ta.a.Queue.Backlog(k); n != 6 || b != 3 {
		t.Fatalf("after the slow-down: %d arrivals and backlog %d, want 6 and 3", n, b)
	}
	// Raise the global factor instead: every bucket speeds up, and the
	// bucket suspended for up to 10 s at the slow rate is woken at once
	// (see TestSpeedUpWakesSuspendedBucket).
	changed = time.Now()
	if code, body := ta.admin(http.MethodPut, "/admin/factors/global", `{"factor":500}`); code != 200 {
		t.Fatalf("PUT global: %d %s", code, body)
	}
	receiveOK(t, results, 3)
	at = ta.arrivals()
	if len(at) != 9 {
		t.Fatalf("%d requests reached the model, want 9", len(at))
	}
	checkSpedUp(t, at, 6, changed, slowInterval, fastInterval)
	if got := ta.a.Pacer.EffectiveRate(k); got != 50 {
		t.Fatalf("EffectiveRate = %v, want 0.1 × 500", got)
	}

	// The metrics on the admin listener saw all of it.
	code, body := ta.admin(http.MethodGet, "/metrics", "")
	if code != 200 || !strings.Contains(body, `pacegate_requests_total{model="sim-model",outcome="ok",tenant="acme"} 9`) ||
		!strings.Contains(body, `pacegate_global_factor 500`) {
		t.Fatalf("/metrics: %d\n%s", code, grep(body, "pacegate_requests_total", "pacegate_global_factor"))
	}
}

// TestSpeedUpWakesSuspendedBucket: a rate change reaches requests already queued. A
// bucket paced at one request per 20 s, then sped up, releases its queue
// at the new pace at once. 3 wait (2 would leave checkSpedUp's lower
// bound, the new pace less one interval of slack, nothing to check; 4
// would put the last one's predicted wait at max_wait).
func TestSpeedUpWakesSuspendedBucket(t *testing.T) {
	ta := startApp(t, fastSim(), liveRateConfig)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, hangGuard, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":0.05}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	results := ta.fire(4, "sk-acme")
	eventually(t, hangGuard, "3 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 3 })
	changed := time.Now()
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":50}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	receiveOK(t, results, 4)
	at := ta.arrivals()
	if len(at) != 4 {
		t.Fatalf("%d requests reached the model, want 4", len(at))
	}
	checkSpedUp(t, at, 1, changed, 20*time.Second, fastInterval)
}

// checkSpedUp checks that the requests arriving at at[from:] were paced
// at newInterval, not at the oldInterval in force before: each arrived
// sooner after at[from-1] than the old pace would have released even one
// more, and none earlier than the new pace allows after the change (made
// just after changed).
//
// That lower bound is the pacer's own guarantee (policy.Pacer): a release
// late by less than max(interval, tolerance) keeps the slot grid, so the
// first release after the change may take a slot up to that much before
// it (a grid anchored at the last release, at[from-1]'s, when the change
// came soon after it), and each later one comes at least one interval
// after the one before. Hence arrival j >= changed + (j-from)*newInterval
// - max(newInterval, DefaultPacerTolerance) (the j-th arrival, in order,
// has at least j-from+1 released after the change at or before it). The
// bound counts from the change, not from the first arrival after it: a
// release delayed by a busy machine arrives later, which must not make
// the next one look early.
func checkSpedUp(t *testing.T, at []time.Time, from int, changed time.Time, oldInterval, newInterval time.Duration) {
	t.Helper()
	slack := max(newInterval, policy.DefaultPacerTolerance)
	for j := from; j < len(at); j++ {
		if d := at[j].Sub(at[from-1]); d >= oldInterval {
			t.Errorf("arrival %d came %v after arrival %d: the old pace (%v), not the new one (%v)",
				j, d, from-1, oldInterval, newInterval)
		}
		if d, least := at[j].Sub(changed), time.Duration(j-from)*newInterval-slack; d < least {
			t.Errorf("arrival %d came %v after the change, want >= %v at the new pace (%v)", j, d, least, newInterval)
		}
	}
}

// receiveOK receives n results and fails unless each is a 200.
func receiveOK(t *testing.T, results <-chan result, n int) {
	t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for i := range n {
		select {
		case r := <-results:
			if r.status != 200 {
				t.Fatalf("result %d of %d: %d %s", i+1, n, r.status, r.body)
			}
		case <-guard.C:
			t.Fatalf("got %d of %d results (hang guard %s)", i, n, hangGuard)
		}
	}
}

func grep(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
