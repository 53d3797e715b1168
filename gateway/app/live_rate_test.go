package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

const liveRateConfig = `
defaults: {rate: 0.5, backlog: 100, max_wait: 60s}
tenants:
  - {id: acme, keys: [sk-acme]}
`

// TestQueuedRequestsFollowRateChanges drives the real process: requests
// queue behind a slow pace, a PUT on the admin listener speeds them up,
// another slows the next ones down, and a last one releases them.
func TestQueuedRequestsFollowRateChanges(t *testing.T) {
	ta := startApp(t, fastSim(), liveRateConfig)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, 5*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })

	// 6 requests at 0.5/s: one leaves at once, 5 would need 10 s.
	results := ta.fire(6, "sk-acme")
	eventually(t, 5*time.Second, "5 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 5 })
	first := <-results
	put := time.Now()
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":50}`); code != 200 {
		t.Fatalf("PUT rate 50: %d %s", code, body)
	}
	for range 5 {
		r := <-results
		if r.status != 200 {
			t.Fatalf("queued request: %d %s", r.status, r.body)
		}
		if d := r.at.Sub(put); d > 3*time.Second {
			t.Fatalf("a queued request finished %v after the speed-up; at 50/s all 5 need 0.1 s", d)
		}
	}
	if first.status != 200 {
		t.Fatalf("first request: %d %s", first.status, first.body)
	}

	// Slow down to one per 5 s: the next requests stay queued.
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":0.2}`); code != 200 {
		t.Fatalf("PUT rate 0.2: %d %s", code, body)
	}
	results = ta.fire(3, "sk-acme")
	eventually(t, 5*time.Second, "3 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 3 })
	watch := time.NewTimer(time.Second) // a bounded look at a queue that must not move
	defer watch.Stop()
	select {
	case r := <-results:
		t.Fatalf("a request was released within 1 s at 0.2/s: %d %s", r.status, r.body)
	case <-watch.C:
	}
	if got := ta.a.Queue.Backlog(k); got != 3 {
		t.Fatalf("backlog = %d after the slow-down, want 3", got)
	}
	// Raise the global factor instead: every bucket speeds up, and the
	// bucket suspended for up to 5 s at the slow rate is woken at once
	// (see TestSpeedUpWakesSuspendedBucket).
	if code, body := ta.admin(http.MethodPut, "/admin/factors/global", `{"factor":250}`); code != 200 {
		t.Fatalf("PUT global: %d %s", code, body)
	}
	put = time.Now()
	for range 3 {
		r := <-results
		if r.status != 200 {
			t.Fatalf("released request: %d %s", r.status, r.body)
		}
		if d := r.at.Sub(put); d > 2*time.Second {
			t.Fatalf("released %v after the speed-up", d)
		}
	}
	if got := ta.a.Pacer.EffectiveRate(k); got != 50 {
		t.Fatalf("EffectiveRate = %v, want 0.2 × 250", got)
	}

	// The metrics on the admin listener saw all of it.
	code, body := ta.admin(http.MethodGet, "/metrics", "")
	if code != 200 || !strings.Contains(body, `pacegate_requests_total{model="sim-model",outcome="ok",tenant="acme"} 9`) ||
		!strings.Contains(body, `pacegate_global_factor 250`) {
		t.Fatalf("/metrics: %d\n%s", code, grep(body, "pacegate_requests_total", "pacegate_global_factor"))
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

// TestSpeedUpWakesSuspendedBucket states the seed's promise in full: a
// bucket paced at one request per 20 s, then sped up, releases its queue
// at the new pace at once.
func TestSpeedUpWakesSuspendedBucket(t *testing.T) {
	ta := startApp(t, fastSim(), liveRateConfig)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, 5*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":0.05}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	results := ta.fire(3, "sk-acme")
	eventually(t, 5*time.Second, "2 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 2 })
	<-results
	put := time.Now()
	if code, body := ta.admin(http.MethodPut, "/admin/buckets/acme/"+simModel, `{"rate":50}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	for range 2 {
		if r := <-results; r.at.Sub(put) > 2*time.Second || r.status != 200 {
			t.Fatalf("released %v after the speed-up: %d %s", r.at.Sub(put), r.status, r.body)
		}
	}
}
