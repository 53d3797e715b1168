package main

import (
	"testing"
	"time"
)

func TestBuildTrace(t *testing.T) {
	s := traceSpec{Tenants: 10, Bursty: 2, Rate: 2, SteadyFrac: 0.5, BurstyBaseFrac: 0.25, BurstSize: 20,
		BurstLen: time.Second, BurstEvery: 15 * time.Second, Duration: 60 * time.Second, Seed: 1}
	evs := buildTrace(s)
	count := map[string]int{}
	for i, ev := range evs {
		if i > 0 && ev.At < evs[i-1].At {
			t.Fatal("trace not sorted")
		}
		if ev.At >= s.Duration {
			t.Fatalf("event at %v past the trace", ev.At)
		}
		if (ev.Tenant < 2) != (ev.Class == "bursty") {
			t.Fatalf("tenant %d has class %s", ev.Tenant, ev.Class)
		}
		count[ev.Class]++
	}
	// steady: 8 tenants × 1 req/s × 60 s ≈ 480; bursty: 2 × (4 bursts × 20 + 0.5 × 60) ≈ 220.
	if count["steady"] < 380 || count["steady"] > 580 || count["bursty"] < 180 || count["bursty"] > 260 {
		t.Errorf("counts %v", count)
	}
	if again := buildTrace(s); len(again) != len(evs) || again[5] != evs[5] {
		t.Error("trace not deterministic for a seed")
	}
}
