package main

import (
	"slices"
	"testing"
	"time"
)

func TestWithinKeepsTheMeasuredWindow(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ts := []time.Time{at(-1), at(0), at(5), at(9), at(10), at(11)}
	got := within(ts, t0, 10*time.Millisecond)
	if want := []time.Time{at(0), at(5), at(9)}; !slices.Equal(got, want) {
		t.Errorf("within = %v, want %v", got, want)
	}
	if got := within(ts, at(20), time.Second); len(got) != 0 {
		t.Errorf("a window after every release kept %v", got)
	}
}

// pacedRun is a run of rate whose releases are exactly on its grid, but
// for every tenth, which comes lost intervals late with the grid moved.
func pacedRun(rate float64, inStep bool, lost int) pacingRun {
	r := pacingRun{Rate: rate, InStep: inStep}
	interval := time.Duration(float64(time.Second) / rate)
	at := time.Unix(100, 0)
	for i := range 100 {
		if lost > 0 && i%10 == 9 {
			at = at.Add(time.Duration(lost) * interval)
		}
		r.Releases = append(r.Releases, at)
		at = at.Add(interval)
	}
	return r
}

func TestPacingBarsAreTheSpreadRatesAndTheFastestInStep(t *testing.T) {
	var runs []pacingRun
	for _, inStep := range []bool{false, true} {
		for _, rate := range pacingRates {
			lost := 0
			if inStep && rate >= 100 {
				lost = 1 // 10 slots lost: 99 gaps span 109 intervals, 9.174 % under rate
			}
			runs = append(runs, pacedRun(rate, inStep, lost))
		}
	}
	res := &ScenarioResult{}
	pacingReport(&env{mode: "quick", out: t.TempDir()}, res, runs)
	var got []string
	for _, b := range res.Bars {
		got = append(got, b.Claim+" → "+map[bool]string{true: "met", false: "missed"}[b.Pass])
	}
	want := []string{
		"rate error at 1 req/s/bucket, 10,000 buckets → met",
		"rate error at 10 req/s/bucket, 10,000 buckets → met",
		"rate error at 100 req/s/bucket, 10,000 buckets → met",
		"rate error at 1000 req/s/bucket, 10,000 buckets → met",
		"rate error at 1000 req/s/bucket, 10,000 buckets whose releases come due together → missed",
	}
	if !slices.Equal(got, want) {
		t.Errorf("bars:\n%q\nwant\n%q", got, want)
	}
	rows := res.Tables[0].Rows
	if len(rows) != 8 || rows[6][0] != "in step" || rows[6][1] != "100" || rows[6][5] != "9.174 %" {
		t.Errorf("the in-step 100 req/s row: %q", rows[6])
	}
}
