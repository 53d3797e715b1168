package fairshare

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// tenThousand is a model with 10,000 buckets waiting for a pool of 256
// slots that runs 256 requests of 256 of them.
func tenThousand() *Scheduler {
	s := New(0)
	for i := range 10000 {
		k := key(fmt.Sprint("t", i))
		s.Join(k, 1, 1, t0)
		if i < 256 {
			s.Grant(k)
			s.Hold(k, 1, 1, t0)
			s.Start(k, 100, t0)
			s.Join(k, 1, 1, t0)
		}
	}
	return s
}

// BenchmarkGrantTenThousand is one slot's way through the scheduler with
// 10,000 buckets waiting: the room decision, the pick, the grant and its
// hold, the start, and the end of the request it ran.
func BenchmarkGrantTenThousand(b *testing.B) {
	s := tenThousand()
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		k, _ := s.Best([]string{"m"})
		s.Access(k, -1, 256, 256, 0, now)
		s.GrantHold(k, now)
		s.Start(k, 100, now)
		s.Done(k, now)
		s.Join(k, 1, 1, now)
	}
}

// BenchmarkModelsTenThousand is what a metrics scrape reads of the
// scheduler with 10,000 buckets waiting: each model's figures and the
// figures of 20 buckets.
func BenchmarkModelsTenThousand(b *testing.B) {
	s := tenThousand()
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second) // a scrape every second: no figures reused
		s.Models(now)
		for i := range 20 {
			s.Flow(key(fmt.Sprint("t", i)), now)
		}
	}
}

// BenchmarkGrantParallel is a bucket's grant cycle (join, room decision,
// grant and hold, start, end) run on every P at once, each P with its
// own bucket: all on one model ("one model"), or each on a model of its
// own ("a model each"), every model with 1,000 other buckets waiting.
// With a lock per model the second scales with the cores; with one lock
// for every model it would not.
func BenchmarkGrantParallel(b *testing.B) {
	for _, apart := range []bool{false, true} {
		name := "one model"
		if apart {
			name = "a model each"
		}
		b.Run(name, func(b *testing.B) {
			s := New(0)
			procs := runtime.GOMAXPROCS(0)
			for p := range procs {
				for i := range 1000 {
					s.Join(policy.Key{Tenant: fmt.Sprint("w", i), Model: benchModel(p, apart)}, 1, 1, t0)
				}
			}
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				p := int(next.Add(1)-1) % procs
				k := policy.Key{Tenant: fmt.Sprint("g", p), Model: benchModel(p, apart)}
				now := t0
				for pb.Next() {
					now = now.Add(time.Microsecond)
					s.Join(k, 1, 1, now)
					s.Access(k, -1, 256, 256, 0, now)
					s.GrantHold(k, now)
					s.Start(k, 100, now)
					s.Done(k, now)
				}
			})
		})
	}
}

func benchModel(p int, apart bool) string {
	if apart {
		return fmt.Sprint("m", p)
	}
	return "m"
}

// BenchmarkActiveAbove is what every request of a lower band pays for the
// high band's max_slowdown when no high bucket is active: the question,
// with 10,000 buckets waiting.
func BenchmarkActiveAbove(b *testing.B) {
	s := tenThousand()
	k := key("t9999")
	for b.Loop() {
		if s.ActiveAbove(k, 1, t0).Active != 0 {
			b.Fatal("no high bucket here")
		}
	}
}
