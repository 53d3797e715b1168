package control

import (
	"testing"
	"time"
)

// step is one scrape fed to the controller and what it must decide.
type step struct {
	waiting    float64
	pinned     bool
	noData     bool
	wantFactor float64
	wantReason string
}

func run(t *testing.T, c *Controller, start float64, steps []step) {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := start
	for i, s := range steps {
		sm := Sample{Waiting: s.waiting, Upstreams: 1}
		if s.noData {
			sm.Upstreams = 0
		}
		d := c.Step(t0.Add(time.Duration(i)*2*time.Second), "m", f, sm, s.pinned)
		if d.Factor != s.wantFactor || d.Reason != s.wantReason || d.Changed != (d.Factor != f) {
			t.Fatalf("step %d: Step(waiting=%v, factor=%v) = %+v, want factor %v reason %s",
				i, s.waiting, f, d, s.wantFactor, s.wantReason)
		}
		f = d.Factor
	}
}

func testConfig() Config {
	return Config{WaitingTarget: 8, MinFactor: 0.1, MaxFactor: 1, Decrease: 0.5, Increase: 0.25, Hysteresis: 3}
}

func TestControllerDecreasesAfterHysteresisThenEveryNScrapes(t *testing.T) {
	run(t, NewController(testConfig()), 1, []step{
		{waiting: 9, wantFactor: 1, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 1, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonCongested},
		{waiting: 20, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.25, wantReason: ReasonCongested},
		{waiting: 20, wantFactor: 0.25, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.25, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.125, wantReason: ReasonCongested},
		{waiting: 20, wantFactor: 0.125, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.125, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.1, wantReason: ReasonCongested}, // clamped to min
		{waiting: 20, wantFactor: 0.1, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.1, wantReason: ReasonHold},
		{waiting: 20, wantFactor: 0.1, wantReason: ReasonHold}, // at min: no change
	})
}

func TestControllerIncreasesAdditivelyOnceDrained(t *testing.T) {
	run(t, NewController(testConfig()), 0.25, []step{
		{waiting: 4, wantFactor: 0.25, wantReason: ReasonHold},
		{waiting: 0, wantFactor: 0.25, wantReason: ReasonHold},
		{waiting: 0, wantFactor: 0.5, wantReason: ReasonDrained},
		{waiting: 0, wantFactor: 0.75, wantReason: ReasonDrained},
		{waiting: 0, wantFactor: 1, wantReason: ReasonDrained},
		{waiting: 0, wantFactor: 1, wantReason: ReasonHold}, // at max
	})
}

func TestControllerBandAndInterruptionsResetStreaks(t *testing.T) {
	run(t, NewController(testConfig()), 0.5, []step{
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 6, wantFactor: 0.5, wantReason: ReasonHold}, // in band: streak lost
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 9, noData: true, wantFactor: 0.5, wantReason: ReasonNoData},
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 9, pinned: true, wantFactor: 0.5, wantReason: ReasonPinned},
		{waiting: 3, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 3, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold}, // drained streak lost
		{waiting: 9, wantFactor: 0.5, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.25, wantReason: ReasonCongested},
	})
}

func TestControllerLeavesOperatorFactorsOutsideBoundsAlone(t *testing.T) {
	// An operator set 2 (above max 1) without pinning: draining must not
	// "increase" it down to 1; congestion still halves it.
	run(t, NewController(testConfig()), 2, []step{
		{waiting: 0, wantFactor: 2, wantReason: ReasonHold},
		{waiting: 0, wantFactor: 2, wantReason: ReasonHold},
		{waiting: 0, wantFactor: 2, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 2, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 2, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 1, wantReason: ReasonCongested},
	})
	// Below min (0.05 < 0.1): congestion must not raise it to min.
	run(t, NewController(testConfig()), 0.05, []step{
		{waiting: 9, wantFactor: 0.05, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.05, wantReason: ReasonHold},
		{waiting: 9, wantFactor: 0.05, wantReason: ReasonHold},
	})
}

func TestControllerRecordsWhenItChanged(t *testing.T) {
	c := NewController(testConfig())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		c.Step(t0.Add(time.Duration(i)*time.Second), "m", 1, Sample{Waiting: 9, Upstreams: 1}, false)
	}
	if got, want := c.ChangedAt("m"), t0.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("ChangedAt = %v, want %v", got, want)
	}
	if got := c.ChangedAt("other"); !got.IsZero() {
		t.Fatalf("ChangedAt(other) = %v, want zero", got)
	}
}

func TestConfigDefaults(t *testing.T) {
	got := NewController(Config{}).Config()
	want := Config{Interval: 2 * time.Second, WaitingTarget: 8, MinFactor: 0.1, MaxFactor: 1,
		Decrease: 0.5, Increase: 0.05, Hysteresis: DefaultHysteresis, DrainRatio: DefaultDrainRatio}
	if got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
}
