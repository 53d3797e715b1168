package policy

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// varRate is a RateSource whose rate a test can change at any moment.
type varRate struct {
	bits atomic.Uint64
	high bool
}

func newVarRate(r float64) *varRate {
	v := new(varRate)
	v.set(r)
	return v
}

func (v *varRate) set(r float64)                { v.bits.Store(math.Float64bits(r)) }
func (v *varRate) BaseRate(Key) (float64, bool) { return math.Float64frombits(v.bits.Load()), v.high }

type pacerStep struct {
	at   time.Duration
	cost float64
	want time.Duration
}

func runPacer(t *testing.T, p *Pacer, k Key, steps []pacerStep) {
	t.Helper()
	for i, s := range steps {
		if got := p.AcquireOrSuspendAt(t0.Add(s.at), k, s.cost); got != s.want {
			t.Errorf("step %d: AcquireOrSuspendAt(t0+%v, cost %v) = %v, want %v", i, s.at, s.cost, got, s.want)
		}
	}
}

func TestPacerSteps(t *testing.T) {
	ms := time.Millisecond
	p := NewPacer(constRate(2)) // one per 500ms
	runPacer(t, p, kA, []pacerStep{
		{0, 1, 0},                 // a fresh key releases at once
		{0, 1, 500 * ms},          // the next slot; nothing taken
		{300 * ms, 1, 200 * ms},   //
		{500 * ms, 1, 0},          // on the slot
		{1100 * ms, 1, 0},         // 100ms late (< one interval): the grid is kept, last = 1000ms
		{1100 * ms, 1, 400 * ms},  // so the next slot is 1500ms, not 1600ms
		{1500 * ms, 1, 0},         //
		{3000 * ms, 1, 0},         // 1000ms late: restart from now, no burst earned
		{3000 * ms, 1, 500 * ms},  //
		{2000 * ms, 1, 500 * ms},  // the clock jumped back: measured from the last slot
		{3500 * ms, 0, 0},         // a non-positive cost counts as 1
		{4000 * ms, 3, 0},         // a costly release...
		{4000 * ms, 1, 1500 * ms}, // ...pushes the next slot 3 intervals out
		{5500*ms - 1, 1, 1},       //
	})
}

// At high rates a few milliseconds of wake-up lateness are many intervals:
// within the tolerance the late slots are made up back to back, so the
// long-run rate holds; beyond it the grid restarts.
func TestPacerToleranceAtHighRate(t *testing.T) {
	ms := time.Millisecond
	p := NewPacer(constRate(1000)) // one per 1ms, tolerance 20ms
	runPacer(t, p, kA, []pacerStep{
		{0, 1, 0},
		{5 * ms, 1, 0}, // 4ms late: slots 1..5ms are made up at once
		{5 * ms, 1, 0},
		{5 * ms, 1, 0},
		{5 * ms, 1, 0},
		{5 * ms, 1, 0},
		{5 * ms, 1, 1 * ms}, // caught up: the grid is intact
		{6 * ms, 1, 0},
		{40 * ms, 1, 0},      // 33ms late, beyond the tolerance: restart
		{40 * ms, 1, 1 * ms}, // no burst earned
	})
}

func TestPacerRateChangeMovesPendingSlot(t *testing.T) {
	src := newVarRate(1)
	p := NewPacer(src)
	now := t0
	if d := p.AcquireOrSuspendAt(now, kA, 1); d != 0 {
		t.Fatalf("first release: %v", d)
	}
	now = now.Add(100 * time.Millisecond)
	for _, c := range []struct {
		rate float64
		want time.Duration
	}{
		{1, 900 * time.Millisecond},
		{2, 400 * time.Millisecond},    // faster: the slot comes forward
		{0.5, 1900 * time.Millisecond}, // slower: it stretches
		{4, 150 * time.Millisecond},
	} {
		src.set(c.rate)
		if got := p.AcquireOrSuspendAt(now, kA, 1); got != c.want {
			t.Errorf("rate %v: wait %v, want %v", c.rate, got, c.want)
		}
	}
}

func TestPacerFactors(t *testing.T) {
	src := newVarRate(10)
	p := NewPacer(src)
	check := func(what string, want float64) {
		t.Helper()
		if got := p.EffectiveRate(kA); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: EffectiveRate = %v, want %v", what, got, want)
		}
	}
	check("neutral", 10)
	p.SetColumnFactor("m", 0.5)
	check("column 0.5", 5)
	if f := p.ColumnFactor("other"); f != 1 {
		t.Errorf("an unset column reads %v", f)
	}
	p.SetGlobalFactor(0.5)
	check("column 0.5, global 0.5", 2.5)
	src.high = true
	check("high priority ignores a column < 1", 5)
	p.SetColumnFactor("m", 2)
	check("high priority honours a column > 1", 10)
	p.SetColumnFactor("m", 1)
	if p.columns.Load() == nil || len(*p.columns.Load()) != 0 {
		t.Error("a neutral column factor is still stored")
	}
	for _, bad := range []float64{0, -1, math.NaN()} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetGlobalFactor(%v) did not panic", bad)
				}
			}()
			p.SetGlobalFactor(bad)
		}()
	}
}

func TestPacerUnpacedAndPaused(t *testing.T) {
	p := NewPacer(constRate(math.Inf(1)))
	for range 5 {
		if d := p.AcquireOrSuspendAt(t0, kA, 1); d != 0 {
			t.Fatalf("unpaced key suspended for %v", d)
		}
	}
	if p.Len() != 0 {
		t.Fatalf("an unpaced key holds state: Len = %d", p.Len())
	}
	if d := NewPacer(constRate(0)).AcquireOrSuspendAt(t0, kA, 1); d != pausedWait {
		t.Fatalf("zero rate: %v, want %v", d, pausedWait)
	}
}

func TestPacerTokenWeighted(t *testing.T) {
	p := NewPacer(constRate(100)) // tokens/s
	if d := p.AcquireOrSuspendAt(t0, kA, 50); d != 0 {
		t.Fatalf("first: %v", d)
	}
	if d := p.AcquireOrSuspendAt(t0, kA, 10); d != 500*time.Millisecond {
		t.Fatalf("after 50 tokens at 100/s: wait %v, want 500ms", d)
	}
}

// consume simulates a consumer that releases whenever allowed and, when
// suspended, comes back after the wait plus a lateness below latePart of
// one interval. It returns the releases in [from, to) and the end time.
func consume(p *Pacer, k Key, from, to time.Time, latePart float64, seed *uint64) (int, time.Time) {
	n, now := 0, from
	for now.Before(to) {
		d := p.AcquireOrSuspendAt(now, k, 1)
		if d == 0 {
			n++
			continue
		}
		*seed = *seed*6364136223846793005 + 1442695040888963407 // LCG: deterministic lateness
		frac := float64(*seed>>11) / (1 << 53)
		gap := time.Duration(float64(time.Second) / p.EffectiveRate(k))
		now = now.Add(d + time.Duration(frac*latePart*float64(gap)))
	}
	return n, now
}

// TestPacerLongRunRate runs 500 fake seconds per phase and checks the
// achieved rate is within 0.1% of the configured one through a base rate
// change, a column factor and a global factor.
func TestPacerLongRunRate(t *testing.T) {
	src := newVarRate(10)
	p := NewPacer(src)
	seed := uint64(1)
	phase := 500 * time.Second // long enough that ±1 release is under 0.1%
	now := t0
	for _, ph := range []struct {
		name  string
		apply func()
		want  float64
	}{
		{"base 10/s", func() {}, 10},
		{"base 25/s", func() { src.set(25) }, 25},
		{"column 0.5", func() { p.SetColumnFactor("m", 0.5) }, 12.5},
		{"global 1.6", func() { p.SetGlobalFactor(1.6) }, 20},
		{"base 3/s", func() { src.set(3) }, 2.4}, // 3 × 0.5 × 1.6
	} {
		ph.apply()
		var n int
		n, now = consume(p, kA, now, now.Add(phase), 0.3, &seed)
		ideal := ph.want * phase.Seconds()
		if float64(n) < 0.999*ideal || float64(n) > ideal+1 {
			t.Errorf("%s: %d releases in %v, want %.0f (within 0.1%%)", ph.name, n, phase, ideal)
		}
	}
}

// TestPacerEvictsIdleKeys uses one shard so the sweep's reach is exact.
func TestPacerEvictsIdleKeys(t *testing.T) {
	src := newVarRate(1)
	p := NewPacer(src, WithPacerIdle(time.Minute))
	p.keys.init(1, p.idleKey)
	p.AcquireOrSuspendAt(t0, kA, 1)
	for i := range 100 {
		p.AcquireOrSuspendAt(t0, Key{Tenant: "t", Model: string(rune('a' + i))}, 1)
	}
	slow := Key{Tenant: "slow", Model: "m"}
	p.AcquireOrSuspendAt(t0, slow, 7200) // next slot 2h away: not idle
	later := t0.Add(2 * time.Minute)
	for range 10 { // calls for a present key do not sweep
		p.AcquireOrSuspendAt(later, kA, 1)
	}
	if n := p.Len(); n != 102 {
		t.Fatalf("Len = %d, want 102: calls for present keys do not sweep", n)
	}
	// Each insertion inspects 2 entries; a removal moves the newest entry
	// into the hole, which the next inspection looks at. 200 insertions
	// reach every old entry.
	for i := range 200 {
		p.AcquireOrSuspendAt(later, Key{Tenant: "new", Model: strconv.Itoa(i)}, 1)
	}
	if n := p.Len(); n != 202 {
		t.Fatalf("Len after the sweep = %d, want 202 (the 200 new keys, the hot key and the slow one)", n)
	}
	if d := p.AcquireOrSuspendAt(later, slow, 1); d != 2*time.Hour-2*time.Minute {
		t.Fatalf("the slow key lost its slot: wait %v", d)
	}
}

func TestPacerConcurrentFactorChanges(t *testing.T) {
	p := NewPacer(constRate(1000))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				k := Key{Tenant: "t", Model: string(rune('a' + (g*500+i)%7))}
				p.AcquireOrSuspendAt(t0.Add(time.Duration(i)*time.Millisecond), k, 1)
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			p.SetColumnFactor(string(rune('a'+i%7)), 0.5+float64(i%3))
			p.SetGlobalFactor(1 + float64(i%2))
		}
	})
	wg.Wait()
	if p.Len() != 7 {
		t.Fatalf("Len = %d, want 7", p.Len())
	}
}

// The exported forms read the wall clock: in a bubble, Wait and
// AcquireOrSuspend agree, and sleeping the wait they give makes the slot
// come, to the nanosecond.
func TestPacerReadsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPacer(constRate(4)) // one per 250ms
		if d := p.AcquireOrSuspend(kA, 1); d != 0 {
			t.Fatalf("first acquire waited %v", d)
		}
		time.Sleep(100 * time.Millisecond)
		if w, d := p.Wait(kA, 1), p.AcquireOrSuspend(kA, 1); w != 150*time.Millisecond || d != w {
			t.Fatalf("Wait %v, AcquireOrSuspend %v; want 150ms both", w, d)
		}
		time.Sleep(150*time.Millisecond - 1)
		if d := p.AcquireOrSuspend(kA, 1); d != 1 {
			t.Fatalf("1ns early: wait %v, want 1ns", d)
		}
		time.Sleep(1)
		if w, d := p.Wait(kA, 1), p.AcquireOrSuspend(kA, 1); w != 0 || d != 0 {
			t.Fatalf("at the slot: Wait %v, AcquireOrSuspend %v; want 0", w, d)
		}
	})
}

// countingRates is a Table that counts the pacer's lookups in it.
type countingRates struct {
	*Table
	lookups int
}

func (c *countingRates) BaseRate(k Key) (float64, bool) {
	c.lookups++
	return c.Table.BaseRate(k)
}

// The pacer keeps a bucket's base rate while the table's version stays,
// so a release looks the tenant up once per change, and every change
// (an override set or removed, a reload) still moves the pending slot at
// once.
func TestPacerLooksTheTableUpOncePerChange(t *testing.T) {
	ms := time.Millisecond
	tab := &countingRates{Table: NewTable(minimalQuotas(t))}
	p := NewPacer(tab)
	k := Key{"acme", "llama-3-8b"} // 20/s: one per 50ms
	runPacer(t, p, k, []pacerStep{{0, 1, 0}})
	for _, c := range []struct {
		change  func() error
		want    time.Duration // the wait at 10ms, after a release at 0
		lookups int
	}{
		{func() error { return nil }, 40 * ms, 1},
		{func() error { return nil }, 40 * ms, 1}, // kept
		{func() error { return tab.SetBucketOverride(k, Override{Rate: ptr(10.0)}) }, 90 * ms, 2},
		{func() error { return tab.SetTenantOverride("beta", Override{Rate: ptr(1.0)}) }, 90 * ms, 3}, // another tenant's: asked again all the same
		{func() error { return tab.SetBucketOverride(k, Override{}) }, 40 * ms, 4},
		{func() error {
			tab.Reload(mustQuotas(t, minimalDefaults, nil, TenantSpec{ID: "acme", Keys: digests("sk-acme-1"),
				Limits: minimalDefaults, Models: map[string]Limits{"llama-3-8b": with(minimalDefaults, 0, 4)}}))
			return nil
		}, 240 * ms, 5},
	} {
		if err := c.change(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if got := p.WaitAt(t0.Add(10*ms), k, 1); got != c.want {
				t.Errorf("WaitAt = %v, want %v", got, c.want)
			}
			if got := p.AcquireOrSuspendAt(t0.Add(10*ms), k, 1); got != c.want {
				t.Errorf("AcquireOrSuspendAt = %v, want %v", got, c.want)
			}
		}
		if tab.lookups != c.lookups {
			t.Errorf("after %d changes: %d lookups, want %d", c.lookups-1, tab.lookups, c.lookups)
		}
	}
	if _, ok := SharedRate(tab, 2).(VersionedRates); !ok {
		t.Error("SharedRate hides the table's version")
	}
}
