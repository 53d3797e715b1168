package main

import "testing"

// The added TTFT compares what each path adds to the first token, not
// the sim's own time: pacegate's requests here waited longer at the sim
// (they arrived early in its engine steps) and spent 0.2 ms more on the
// path.
func TestAddedTTFTLeavesOutTheSimsOwnTime(t *testing.T) {
	bare := ohRound{ttft: []float64{51, 52, 53}, atSim: []float64{50.9, 51.9, 52.9}, pathTTFT: []float64{0.1, 0.1, 0.1}}
	pg := ohRound{ttft: []float64{58.3, 59.3, 60.3}, atSim: []float64{58, 59, 60}, pathTTFT: []float64{0.3, 0.3, 0.3}}
	d := ohDiffs([]ohRound{bare}, []ohRound{pg})[0]
	if d.ttftP50 < 0.199 || d.ttftP50 > 0.201 || d.ttftP99 < 0.199 || d.ttftP99 > 0.201 {
		t.Errorf("added TTFT p50 %v, p99 %v; want 0.2 ms each", d.ttftP50, d.ttftP99)
	}
}

// TestByOrder splits per-pair figures by which path went first.
func TestByOrder(t *testing.T) {
	got := byOrder([]float64{1, 2, 3, 4, 5}, 1, "ms")
	if want := "the bare proxy first 2.000, 4.000 ms, pacegate first 1.000, 3.000, 5.000 ms"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
