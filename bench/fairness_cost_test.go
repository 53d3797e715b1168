package main

import "testing"

// The cost figures are measured by the scenario; this checks what they
// measure: the buckets are forgotten once idle.
func TestFairIdleMemoryForgets(t *testing.T) {
	if _, _, known := fairIdleMemory(1000); known != 0 {
		t.Fatalf("%d buckets still known after they went idle, want 0", known)
	}
}
