package policy

import (
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC) // on a minute boundary

var kA = Key{Tenant: "a", Model: "m"}

// step is one call at t0+at, with what it must answer.
type step struct {
	at        time.Duration
	wantOK    bool
	wantRem   int64
	wantRetry time.Duration
}

// run checks a limiter against a step table; decide makes one call.
func run(t *testing.T, decide func(now time.Time) Decision, steps []step) {
	t.Helper()
	for i, s := range steps {
		d := decide(t0.Add(s.at))
		if d.Allowed != s.wantOK || d.Remaining != s.wantRem || d.RetryAfter != s.wantRetry {
			t.Errorf("step %d: at t0+%v: got allowed=%v remaining=%d retry=%v (%s), want %v %d %v",
				i, s.at, d.Allowed, d.Remaining, d.RetryAfter, d.Reason, s.wantOK, s.wantRem, s.wantRetry)
		}
		if d.Allowed != (d.Reason == ReasonOK) {
			t.Errorf("step %d: reason %s with allowed=%v", i, d.Reason, d.Allowed)
		}
	}
}

func TestFixedWindowSteps(t *testing.T) {
	w := NewFixedWindow(time.Minute, 3)
	run(t, func(now time.Time) Decision { return w.AllowAt(now, kA) }, []step{
		{0, true, 2, 0},
		{10 * time.Second, true, 1, 0},
		{20 * time.Second, true, 0, 0},
		{30 * time.Second, false, 0, 30 * time.Second},           // retry at the window edge
		{60*time.Second - 1, false, 0, 1},                        // one ns short
		{60 * time.Second, true, 2, 0},                           // new window: the edge burst is by design
		{30 * time.Second, true, 1, 0},                           // clock jumped back: still the newer window
		{time.Minute + 59*time.Second, true, 0, 0},               //
		{2 * time.Minute, true, 2, 0},                            //
		{2*time.Minute + 59*time.Second + 999999999, true, 1, 0}, // same window until the last ns
	})
}

func TestFixedWindowReserveAdjust(t *testing.T) {
	w := NewFixedWindow(time.Minute, 0)
	now := t0.Add(5 * time.Second)
	d, win := w.ReserveAt(now, kA, 100, 70)
	if !d.Allowed || d.Remaining != 30 {
		t.Fatalf("reserve 70/100: %+v", d)
	}
	if d, _ := w.ReserveAt(now, kA, 100, 40); d.Allowed || d.RetryAfter != 55*time.Second {
		t.Fatalf("reserve 40 more: %+v, want denied with 55s", d)
	}
	if !w.AdjustAt(now, kA, win, -50) { // reconcile: used 20 of 70
		t.Fatal("adjust in the current window did not apply")
	}
	if c, _ := w.UsageAt(now, kA); c != 20 {
		t.Fatalf("usage after adjust = %d, want 20", c)
	}
	if w.AdjustAt(now.Add(time.Minute), kA, win, -20) {
		t.Fatal("adjust of a past window applied")
	}
	// A cost above the whole limit is let in alone into an empty window.
	if d, _ := w.ReserveAt(now.Add(2*time.Minute), kA, 100, 500); !d.Allowed {
		t.Fatalf("oversized cost into an empty window: %+v", d)
	}
	if d, _ := w.ReserveAt(now.Add(2*time.Minute), kA, 100, 1); d.Allowed {
		t.Fatalf("window over its limit admitted more: %+v", d)
	}
}

func TestTokenBucketSteps(t *testing.T) {
	b := NewTokenBucket(BucketParams{Capacity: 3, Refill: 1})
	run(t, func(now time.Time) Decision { return b.AllowAt(now, kA) }, []step{
		{0, true, 2, 0},
		{0, true, 1, 0},
		{0, true, 0, 0},
		{0, false, 0, time.Second},
		{500 * time.Millisecond, false, 0, 500 * time.Millisecond}, // denials spend nothing
		{time.Second - 1, false, 0, 1},
		{time.Second, true, 0, 0},
		{-time.Hour, false, 0, time.Hour + 2*time.Second}, // clock back: no refill until it passes the last spend (1s)
		{10 * time.Second, true, 2, 0},                    // capped at capacity, refill before spend
		{10*time.Second + 250*time.Millisecond, true, 1, 0},
	})
}

func TestTokenBucketInvalidCost(t *testing.T) {
	b := NewTokenBucket(BucketParams{Capacity: 3, Refill: 1})
	for _, c := range []float64{0, -1} {
		if _, err := b.TakeAt(t0, kA, c, b.params); err != ErrInvalidCost {
			t.Errorf("cost %v: err = %v, want ErrInvalidCost", c, err)
		}
	}
}
