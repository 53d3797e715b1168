package cluster

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// evalAt runs a script once with explicit arguments.
func evalAt(t *testing.T, s *Store, sc *redis.Script, keys []string, args ...any) any {
	t.Helper()
	v, err := sc.Run(context.Background(), s.rdb, keys, args...).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("script: %v", err)
	}
	return v
}

const t0 = int64(1_800_000_000_000_000) // µs

// TestAdmitScriptSteps drives admitLua through a window of limit 5 and a
// burst bucket of capacity 3 refilled at 2 tokens/s, asking both at each
// step, and checks each reply whole.
func TestAdmitScriptSteps(t *testing.T) {
	p := testPrefix(t)
	s := newTestStore(t, p, 1)
	keys := []string{p + "epoch", p + "hold", p + "pace", p + "w", p + "b"}
	type step struct {
		at           int64 // µs after t0
		wNeed, wWant int64
		bNeed, bWant int64
		want         []any
	}
	steps := []step{
		// The first call creates the epoch; the window grants its want, the bucket its want (3 held).
		{0, 1, 2, 1, 2, []any{int64(1), "", int64(0), int64(-1), int64(2), int64(2), int64(2), int64(1)}},
		{0, 1, 4, 1, 1, []any{int64(1), "", int64(0), int64(-1), int64(3), int64(5), int64(1), int64(0)}},
		// The window is full: denied on the first counter, nothing charged.
		{0, 1, 1, 1, 1, []any{int64(0), "", int64(1), int64(0)}},
		// Window room aside (need 0 is a test of the bucket alone): the
		// bucket is empty; 1 token needs 0.5 s at 2/s.
		{0, 0, 0, 1, 1, []any{int64(0), "", int64(2), int64(500_000)}},
		{250_000, 0, 0, 1, 1, []any{int64(0), "", int64(2), int64(250_000)}},
		// At 0.5 s one token is there; a want of 3 gets the 1 whole token.
		{500_000, 0, 0, 1, 3, []any{int64(1), "", int64(0), int64(-1), int64(0), int64(5), int64(1), int64(0)}},
		// A need above the capacity never fits: wait -1.
		{2_000_000, 0, 0, 4, 4, []any{int64(0), "", int64(2), int64(-1)}},
	}
	var epoch string
	for i, st := range steps {
		got := evalAt(t, s, admitScript, keys, t0+st.at, "", 0, 0, 0, 0,
			"w", 5, st.wNeed, st.wWant, 120000, "b", 3, st.bNeed, st.bWant, 2.0).([]any)
		if i == 0 {
			epoch, _ = got[1].(string)
			if epoch != "1800000000000000" {
				t.Fatalf("epoch %q, want the first call's time", got[1])
			}
		}
		st.want[1] = epoch
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d (t+%dµs): reply %v, want %v", i, st.at, got, st.want)
		}
	}
	if ttl := s.rdb.PTTL(context.Background(), p+"w").Val(); ttl <= 0 || ttl > 120*time.Second {
		t.Errorf("window key TTL %v", ttl)
	}
}

// TestAdmitScriptAloneInEmptyWindow: a cost above the whole cap goes
// alone into an empty window, as policy.FixedWindow lets it.
func TestAdmitScriptAloneInEmptyWindow(t *testing.T) {
	p := testPrefix(t)
	s := newTestStore(t, p, 1)
	keys := []string{p + "epoch", p + "hold", p + "pace", p + "w"}
	got := evalAt(t, s, admitScript, keys, t0, "", 0, 0, 0, 0, "w", 100, 150, 160, 120000).([]any)
	if got[0] != int64(1) || got[4] != int64(150) || got[5] != int64(150) {
		t.Fatalf("alone in an empty window: %v", got)
	}
	got = evalAt(t, s, admitScript, keys, t0, "", 0, 0, 0, 0, "w", 100, 1, 1, 120000).([]any)
	if got[0] != int64(0) || got[2] != int64(1) {
		t.Fatalf("after it: %v, want a denial", got)
	}
}

// TestAdmitScriptHoldAfterRestart: a caller that knew an epoch and finds
// none (the store lost its data) sets the hold; while it lasts nobody is
// granted anything. A caller that knew no epoch (a fresh cluster) does
// not.
func TestAdmitScriptHoldAfterRestart(t *testing.T) {
	p := testPrefix(t)
	s := newTestStore(t, p, 1)
	keys := []string{p + "epoch", p + "hold", p + "pace", p + "w"}
	got := evalAt(t, s, admitScript, keys, t0, "", 300, 0, 0, 0, "w", 5, 1, 1, 120000).([]any)
	if got[0] != int64(1) {
		t.Fatalf("fresh cluster: %v, want granted", got)
	}
	s.rdb.Del(context.Background(), p+"epoch", p+"w") // as a restart would
	got = evalAt(t, s, admitScript, keys, t0+10, "1800000000000000", 300, 0, 0, 0, "w", 5, 1, 1, 120000).([]any)
	if got[0] != int64(-1) || got[1] != "1800000000000010" {
		t.Fatalf("after the restart: %v, want hold with the new epoch", got)
	}
	if w := got[3].(int64); w <= 0 || w > 300_000 {
		t.Fatalf("hold wait %dµs, want (0, 300 ms]", w)
	}
	if n, _ := s.rdb.Get(context.Background(), p+"w").Int64(); n != 0 {
		t.Fatalf("a hold granted %d", n)
	}
}

// TestSettleScriptSteps: give-backs floor at zero and are skipped under
// another epoch; charges always apply; a bucket goes negative on a charge
// and never above its capacity on a give-back.
func TestSettleScriptSteps(t *testing.T) {
	p := testPrefix(t)
	s := newTestStore(t, p, 1)
	ctx := context.Background()
	keys := []string{p + "epoch", p + "hold", p + "w", p + "b"}
	admitKeys := []string{p + "epoch", p + "hold", p + "pace", p + "w", p + "b"}
	evalAt(t, s, admitScript, admitKeys, t0, "", 0, 0, 0, 0, "w", 10, 4, 4, 120000, "b", 4, 4, 4, 1.0)
	epoch := s.rdb.Get(ctx, p+"epoch").Val()
	type step struct {
		epoch          string
		wDelta, bDelta int64
		wantW          int64
		wantB          string
	}
	for i, st := range []step{
		{epoch, -3, -1, 1, "1.000000"},   // give back 3 of 4, and one token
		{epoch, -5, -9, 0, "4.000000"},   // floors at 0; the bucket caps at 4
		{"other", -1, -1, 0, "4.000000"}, // another epoch's give-backs are skipped
		{"other", 7, 6, 7, "-2.000000"},  // charges apply whatever the epoch
	} {
		got := evalAt(t, s, settleScript, keys, t0, st.epoch, 0, "w", st.wDelta, 10, 120000, "b", st.bDelta, 4, 1.0)
		if got != epoch {
			t.Errorf("step %d: reply %v, want the epoch", i, got)
		}
		w, _ := s.rdb.Get(ctx, p+"w").Int64()
		b := s.rdb.HGet(ctx, p+"b", "tokens").Val()
		if w != st.wantW || b != st.wantB {
			t.Errorf("step %d: window %d bucket %s, want %d %s", i, w, b, st.wantW, st.wantB)
		}
	}
	// The hold argument sets the hold: a minute, so that it is still
	// there however long the next round trip takes.
	evalAt(t, s, settleScript, keys[:2], t0, epoch, 60_000)
	if ttl := s.rdb.PTTL(ctx, p+"hold").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("hold TTL %v", ttl)
	}
}

// TestPaceScriptSteps walks one bucket's shared schedule at 5/s (200 ms)
// with a 20 ms tolerance.
func TestPaceScriptSteps(t *testing.T) {
	p := testPrefix(t)
	s := newTestStore(t, p, 1)
	key := []string{p + "pace"}
	for i, st := range []struct{ at, wait int64 }{
		{0, 0},               // a fresh bucket releases at once; next = 200 ms
		{0, 200_000},         // another replica asking at once gets 200 ms
		{10_000, 390_000},    // and the next one 400 ms
		{600_000, 0},         // on time for 600 ms
		{815_000, -15_000},   // 15 ms late for 800 ms: the grid holds (slot 800 ms, passed)
		{900_000, 100_000},   // so the next is 1,000 ms
		{1_500_000, 0},       // 300 ms late for 1,200: beyond max(200, 20) ms, restart now
		{1_500_001, 199_999}, // next is 1,700 ms
	} {
		got := evalAt(t, s, paceScript, key, t0+st.at, 200_000, 20_000, 1, 60_000)
		if got != st.wait {
			t.Errorf("step %d (t+%dµs): wait %v, want %d", i, st.at, got, st.wait)
		}
	}
}

// TestPaceScriptBatchAndAdmission: a batch of 3 slots moves the schedule
// three intervals on, and a granted admission that asks for a slot takes
// the next one in the same call.
func TestPaceScriptBatchAndAdmission(t *testing.T) {
	p := testPrefix(t)
	s := newTestStore(t, p, 1)
	pace := []string{p + "pace"}
	if got := evalAt(t, s, paceScript, pace, t0, 200_000, 20_000, 3, 60_000); got != int64(0) {
		t.Fatalf("batch of 3: first slot in %vµs, want now", got)
	}
	keys := []string{p + "epoch", p + "hold", p + "pace", p + "w"}
	got := evalAt(t, s, admitScript, keys, t0+100_000, "", 0, 200_000, 20_000, 60_000, "w", 5, 1, 1, 120000).([]any)
	if got[0] != int64(1) || got[3] != int64(500_000) {
		t.Fatalf("admission after a batch of 3 at 5/s: %v, want a slot 500 ms on (t0+600 ms)", got)
	}
	got = evalAt(t, s, admitScript, keys, t0+100_000, "", 0, 200_000, 20_000, 60_000, "w", 1, 1, 1, 120000).([]any)
	if got[0] != int64(0) {
		t.Fatalf("a denied admission: %v", got)
	}
	if next := s.rdb.Get(context.Background(), p+"pace").Val(); next != "1800000000800000" {
		t.Fatalf("a denial moved the schedule: next %s", next)
	}
}
