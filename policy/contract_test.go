package policy

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// constRate is a RateSource with one rate for every key.
type constRate float64

func (r constRate) BaseRate(Key) (float64, bool) { return float64(r), false }

// pacerLimiter adapts the pacer to the Limiter contract: a release slot
// is an allow, a suspension a denial.
type pacerLimiter struct{ p *Pacer }

func (l pacerLimiter) AllowAt(now time.Time, k Key) Decision {
	if d := l.p.AcquireOrSuspendAt(now, k, 1); d > 0 {
		return Decision{RetryAfter: d, Reason: "SUSPEND"}
	}
	return Decision{Allowed: true, Reason: ReasonOK}
}

// algorithms are configured for 3 requests per minute; burst is how many
// a fresh key gets at one instant.
var algorithms = []struct {
	name  string
	burst int
	new   func() Limiter
}{
	{"FixedWindow", 3, func() Limiter { return NewFixedWindow(time.Minute, 3) }},
	{"TokenBucket", 3, func() Limiter { return NewTokenBucket(BucketParams{Capacity: 3, Refill: 3.0 / 60}) }},
	{"Pacer", 1, func() Limiter { return pacerLimiter{NewPacer(constRate(3.0 / 60))} }},
}

func TestContract(t *testing.T) {
	cases := []struct {
		name string
		test func(t *testing.T, now time.Time, l Limiter, burst int)
	}{
		{"BurstThenDeny", contractBurstThenDeny},
		{"RetryAfterIsExact", contractRetryAfterExact},
		{"KeysAreIndependent", contractKeysIndependent},
		{"ClockJumpsBack", contractClockBack},
		{"ConcurrentFlood", contractFlood},
	}
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					c.test(t, t0.Add(10*time.Second), alg.new(), alg.burst)
				})
			}
		})
	}
}

// exhaust spends a fresh key's burst at now, failing if any is denied.
func exhaust(t *testing.T, l Limiter, now time.Time, k Key, burst int) {
	t.Helper()
	for i := range burst {
		if d := l.AllowAt(now, k); !d.Allowed {
			t.Fatalf("call %d of the burst denied: %+v", i, d)
		}
	}
}

func contractBurstThenDeny(t *testing.T, now time.Time, l Limiter, burst int) {
	exhaust(t, l, now, kA, burst)
	d := l.AllowAt(now, kA)
	if d.Allowed || d.Reason == ReasonOK || d.RetryAfter <= 0 {
		t.Fatalf("call after the burst: %+v, want a denial with a reason and RetryAfter", d)
	}
}

func contractRetryAfterExact(t *testing.T, now time.Time, l Limiter, burst int) {
	exhaust(t, l, now, kA, burst)
	d := l.AllowAt(now, kA)
	if d.Allowed {
		t.Fatal("not denied after the burst")
	}
	if early := l.AllowAt(now.Add(d.RetryAfter-1), kA); early.Allowed {
		t.Fatalf("allowed 1ns before RetryAfter %v", d.RetryAfter)
	}
	if at := l.AllowAt(now.Add(d.RetryAfter), kA); !at.Allowed {
		t.Fatalf("denied at RetryAfter %v: %+v", d.RetryAfter, at)
	}
}

func contractKeysIndependent(t *testing.T, now time.Time, l Limiter, burst int) {
	exhaust(t, l, now, kA, burst)
	exhaust(t, l, now, Key{Tenant: "b", Model: "m"}, burst)
	exhaust(t, l, now, Key{Tenant: "a", Model: "other"}, burst)
}

func contractClockBack(t *testing.T, now time.Time, l Limiter, burst int) {
	exhaust(t, l, now, kA, burst)
	for _, back := range []time.Duration{time.Nanosecond, time.Second, time.Hour} {
		if d := l.AllowAt(now.Add(-back), kA); d.Allowed {
			t.Fatalf("clock %v back: allowed an extra request", back)
		} else if d.RetryAfter <= 0 {
			t.Fatalf("clock %v back: RetryAfter %v", back, d.RetryAfter)
		}
	}
}

func contractFlood(t *testing.T, now time.Time, l Limiter, burst int) {
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 80 {
		wg.Go(func() {
			if l.AllowAt(now, kA).Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != int64(burst) {
		t.Fatalf("80 concurrent calls: %d allowed, want %d", got, burst)
	}
}

// TestTokenBucketFlood: 80 goroutines on one key with a burst of 50 get
// exactly 50 tokens; the 30 denials are BURST_LIMIT and spend nothing.
func TestTokenBucketFlood(t *testing.T) {
	p := BucketParams{Capacity: 50, Refill: 1000.0 / 60}
	b := NewTokenBucket(p)
	var allowed, burstDenied atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 80 {
		wg.Go(func() {
			<-start
			d, err := b.TakeAt(t0, kA, 1, p)
			switch {
			case err != nil:
				t.Error(err)
			case d.Allowed:
				allowed.Add(1)
			case d.Reason == ReasonBurst:
				burstDenied.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if allowed.Load() != 50 || burstDenied.Load() != 30 {
		t.Fatalf("allowed %d, BURST_LIMIT %d; want 50 and 30", allowed.Load(), burstDenied.Load())
	}
	if w := b.WaitAt(t0, kA, 1, p); w != 60*time.Millisecond {
		t.Fatalf("WaitAt after the flood = %v, want 60ms (one token at 1000/60 per s)", w)
	}
}

func TestTokenBucketRefundAndWait(t *testing.T) {
	p := BucketParams{Capacity: 2, Refill: 1}
	b := NewTokenBucket(p)
	if w := b.WaitAt(t0, kA, 1, p); w != 0 || b.Len() != 0 {
		t.Fatalf("WaitAt of a key not held = %v (Len %d), want 0 and no state", w, b.Len())
	}
	b.TakeAt(t0, kA, 1, p)
	b.TakeAt(t0, kA, 1, p)
	if w := b.WaitAt(t0, kA, 1, p); w != time.Second {
		t.Fatalf("WaitAt of an empty bucket = %v, want 1s", w)
	}
	b.RefundAt(t0, kA, 1)
	if d, _ := b.TakeAt(t0, kA, 1, p); !d.Allowed {
		t.Fatalf("refunded token not spendable: %+v", d)
	}
	b.RefundAt(t0.Add(time.Hour), kA, 5) // capped at the capacity
	if d, _ := b.TakeAt(t0.Add(time.Hour), kA, 3, p); d.Allowed {
		t.Fatalf("a refund overfilled the bucket: %+v", d)
	}
}

// Sweep drops the buckets that are full again and keeps the others, so
// that a caller bounding its keys can make room without adding one.
func TestTokenBucketSweep(t *testing.T) {
	p := BucketParams{Capacity: 1, Refill: 1}
	b := NewTokenBucket(p)
	b.TakeAt(t0, kA, 1, p)
	b.TakeAt(t0.Add(500*time.Millisecond), Key{Tenant: "b", Model: "m"}, 1, p)
	b.Sweep(t0.Add(time.Second)) // kA is full again, kB half
	if b.Len() != 1 || b.WaitAt(t0.Add(time.Second), Key{Tenant: "b", Model: "m"}, 1, p) != 500*time.Millisecond {
		t.Fatalf("after Sweep: Len %d, kB waits %v; want 1 and 500ms", b.Len(), b.WaitAt(t0.Add(time.Second), Key{Tenant: "b", Model: "m"}, 1, p))
	}
}
