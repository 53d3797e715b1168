package fairshare

import (
	"testing"
	"time"
)

// noisyModel builds the noisy-neighbour state on a model of 8 slots:
// heavy runs all 8, and the light buckets a, b and c have each just
// ended a request (they pause before the next one).
func noisyModel() *Scheduler {
	s := New(0)
	for range 8 {
		s.Start(key("heavy"), 1, t0)
	}
	for _, l := range []string{"a", "b", "c"} {
		s.Start(key(l), 1, t0)
		s.Done(key(l), t0)
	}
	return s
}

func TestAccessKeepsRoomForBucketsBelowTheirShare(t *testing.T) {
	const total, headroom = 8, 2
	later := t0.Add(DefaultActiveWindow)
	cases := []struct {
		name     string
		tenant   string
		band     int
		headroom int
		at       time.Time
		want     Access
	}{
		// Four recent buckets of weight 1: a share of 2 slots each.
		{"a light bucket below its share takes the headroom", "a", 1, headroom, t0, AccessHeadroom},
		// 8 running + 6 owed to a, b and c is not below 8 + 2.
		{"heavy, above its share, waits while the room is owed", "heavy", 1, headroom, t0, AccessWait},
		// 8 running + 6 owed is not below 8 either: the owed room is
		// kept within the limits too.
		{"without headroom heavy still waits while the room is owed", "heavy", 1, 0, t0, AccessWait},
		// A window later a, b and c are no longer recent: nothing is owed
		// to them, and heavy's share is the whole pool, which it runs
		// already: any slot within the limits, never the headroom.
		{"once the light buckets are gone heavy may take any slot within the limits", "heavy", 1, headroom, later, AccessLimit},
		{"a new bucket runs nothing: it is owed", "new", 1, headroom, t0, AccessHeadroom},
		{"the high band is always owed", "heavy", 0, headroom, t0, AccessHeadroom},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := noisyModel()
			if got := s.Access(key(tc.tenant), tc.band, 8, total, tc.headroom, tc.at); got != tc.want {
				t.Fatalf("Access = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAccessNeverBeyondTheHeadroom(t *testing.T) {
	s := noisyModel()
	s.Start(key("a"), 1, t0)
	s.Start(key("b"), 1, t0) // 10 running: 8 + the headroom of 2
	if got := s.Access(key("c"), 1, 10, 8, 2, t0); got != AccessLimit {
		t.Fatalf("c, owed a slot with the headroom used up: Access = %d, want AccessLimit (%d)", got, AccessLimit)
	}
	if got := s.Access(key("c"), 0, 10, 8, 2, t0); got != AccessLimit {
		t.Fatalf("a high bucket with the headroom used up: Access = %d, want AccessLimit (%d)", got, AccessLimit)
	}
}

func TestAccessLowerBandNotOwedWhileAHigherOneIsRecent(t *testing.T) {
	s := noisyModel()
	s.Start(key("vip"), 1, t0)
	s.Done(key("vip"), t0)
	s.Join(key("vip"), 0, 1, t0) // marks the high band as seen
	s.Leave(key("vip"))
	s.Join(key("a"), 1, 1, t0)
	if got := s.Access(key("a"), -1, 8, 8, 2, t0); got == AccessHeadroom {
		t.Fatal("a normal bucket was given the headroom while a high bucket used the model")
	}
}

func TestBestOwedSkipsBucketsAboveTheirShare(t *testing.T) {
	s := noisyModel()
	s.Join(key("a"), 1, 1, t0)
	s.Join(key("heavy"), 1, 1, t0)
	s.Charge(key("a"), 1000, t0) // a is owed less service than heavy by the counters...
	if k, _ := s.Best([]string{"m"}); k != key("heavy") {
		t.Fatalf("Best = %v, want heavy (the lower counter)", k)
	}
	// ...but only a runs below its share of the slots.
	if k, ok := s.BestOwed("m", 8, 8, 2, t0); !ok || k != key("a") {
		t.Fatalf("BestOwed = %v %v, want a", k, ok)
	}
	for range 2 {
		s.Start(key("a"), 1, t0)
	}
	if k, ok := s.BestOwed("m", 10, 8, 2, t0); ok {
		t.Fatalf("BestOwed = %v with the headroom used up, want none", k)
	}
}

// A slot taken for a bucket counts against its share from the moment it
// is taken (Hold), not only once its request starts: two deliveries of
// one bucket a moment apart must not both find it owed a slot.
func TestHoldCountsATakenSlotBeforeItStarts(t *testing.T) {
	s := noisyModel()
	s.Hold(key("a"), 1, 1, t0)
	s.Hold(key("a"), 1, 1, t0) // a's share is 2
	if got := s.Access(key("a"), 1, 10, 8, 2, t0); got != AccessWait {
		t.Fatalf("a with two slots taken: Access = %d, want AccessWait (%d)", got, AccessWait)
	}
	s.Start(key("a"), 1, t0) // uses up a hold: still two
	if got := s.Access(key("a"), 1, 10, 8, 2, t0); got != AccessWait {
		t.Fatalf("a with one slot taken and one started: Access = %d, want AccessWait (%d)", got, AccessWait)
	}
	s.Unhold(key("a"), t0) // the other slot was released unused
	if got := s.Access(key("a"), 1, 9, 8, 2, t0); got != AccessHeadroom {
		t.Fatalf("a with one request running: Access = %d, want AccessHeadroom (%d)", got, AccessHeadroom)
	}
}

// A bucket below its share is kept no more room than it ran at once:
// a light client of one stream beside heavy, both of share 4 of 8 slots,
// is kept one slot between its requests, not four.
func TestAccessKeepsNoMoreThanTheBucketUsed(t *testing.T) {
	s := New(0)
	for range 6 {
		s.Start(key("heavy"), 1, t0)
	}
	s.Start(key("light"), 1, t0)
	s.Done(key("light"), t0)
	if got := s.Access(key("heavy"), 1, 6, 8, 0, t0); got != AccessLimit {
		t.Fatalf("heavy at 6 of 8 with light owed 1: %d, want AccessLimit", got)
	}
	s.Start(key("heavy"), 1, t0)
	if got := s.Access(key("heavy"), 1, 7, 8, 0, t0); got != AccessWait {
		t.Fatalf("heavy at 7 of 8 with light owed 1: %d, want AccessWait", got)
	}
	if got := s.Access(key("light"), 1, 7, 8, 0, t0); got != AccessHeadroom {
		t.Fatalf("light: %d, want AccessHeadroom (owed)", got)
	}
}
