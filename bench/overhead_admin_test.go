package main

import (
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pacegate/pacegate/gateway/metrics"
)

// The harness reads pacegate's queue waits as the process exposes them:
// every model's series summed, a round's as the difference of two
// readings, its p99 as the bound of the bucket that holds it.
func TestQueueWaitsFromTheExposition(t *testing.T) {
	m := metrics.New(metrics.Config{MaxTenants: 4, MaxModels: 4})
	read := func() waitHist {
		t.Helper()
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		h, err := parseQueueWait(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	m.QueueWait("a", "m1", time.Second) // before the round
	before := read()
	for range 97 {
		m.QueueWait("a", "m1", 8*time.Microsecond)
	}
	m.QueueWait("b", "m2", 15*time.Microsecond)
	m.QueueWait("b", "m2", 40*time.Microsecond)
	m.QueueWait("b", "m2", 3*time.Millisecond)
	round := read().since(before)
	if n := round.count(); n != 100 {
		t.Fatalf("%d waits in the round, want 100", n)
	}
	if got := round.within(20e-6); got != 0.98 {
		t.Errorf("within 20 µs: %v, want 0.98", got)
	}
	if got := round.quantileLE(0.98); got != 20e-6 {
		t.Errorf("p98 ≤ %v s, want 2e-05", got)
	}
	if got := round.quantileLE(0.99); got != 50e-6 {
		t.Errorf("p99 ≤ %v s, want 5e-05", got)
	}
	if got := round.add(round).within(10e-6); got != 0.97 {
		t.Errorf("pooled within 10 µs: %v, want 0.97", got)
	}
	if got := usBound(round.quantileLE(0.99)); got != "50 µs" {
		t.Errorf("usBound %q, want \"50 µs\"", got)
	}
	if !math.IsNaN((waitHist{}).quantileLE(0.99)) {
		t.Error("an empty histogram has a p99")
	}
}
