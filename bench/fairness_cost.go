package main

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// fairCostBuckets is how many buckets wait in the cost measurements.
const fairCostBuckets = 10000

// fairCostSlots is the model's room in the cost measurements.
const fairCostSlots = 256

func fairCostKey(i int) policy.Key { return policy.Key{Tenant: fmt.Sprint("t", i), Model: "m"} }

// fairCostScheduler is a model with n buckets waiting and fairCostSlots of
// them running a request.
func fairCostScheduler(n int, t0 time.Time) *fairshare.Scheduler {
	s := fairshare.New(0)
	for i := range n {
		k := fairCostKey(i)
		s.Join(k, 1, 1, t0)
		if i < fairCostSlots {
			s.Grant(k)
			s.Hold(k, 1, 1, t0)
			s.Start(k, 100, t0)
			s.Join(k, 1, 1, t0)
		}
	}
	return s
}

// fairGrantBatch is how many grants fairGrantCost times between two
// stops of the timer: testing.B's StopTimer and StartTimer read the clock
// and the runtime's memory statistics, which would cost more than the
// grant itself if done around each one.
const fairGrantBatch = 128

// fairGrantCost measures one grant with waiting buckets waiting: the
// pick of the bucket owed the most, the room decision, the grant and its
// hold, in ns, median of 5 runs. Each batch of fairGrantBatch grants is
// timed whole; then, outside the timing, each granted bucket's request
// starts and ends and the bucket joins again.
func fairGrantCost(waiting int) float64 {
	t0 := time.Now()
	s := fairCostScheduler(waiting, t0)
	models := []string{"m"}
	granted := make([]policy.Key, 0, fairGrantBatch)
	var reps []float64
	for range 5 {
		now := t0
		r := testing.Benchmark(func(b *testing.B) {
			for i := 0; i < b.N; i += fairGrantBatch {
				granted = granted[:0]
				for range min(fairGrantBatch, b.N-i) {
					now = now.Add(time.Microsecond)
					k, _ := s.Best(models)
					s.Access(k, -1, fairCostSlots, fairCostSlots, 0, now)
					s.GrantHold(k, now)
					granted = append(granted, k)
				}
				b.StopTimer()
				for _, k := range granted {
					s.Start(k, 100, now)
					s.Done(k, now)
					s.Join(k, 1, 1, now)
				}
				b.StartTimer()
			}
		})
		reps = append(reps, float64(r.NsPerOp()))
	}
	return Median(reps)
}

// fairScrapeCost is what one metrics scrape reads of the scheduler with
// waiting buckets: every model's figures and the top 20 buckets', in µs,
// median of 5.
func fairScrapeCost(waiting int) float64 {
	t0 := time.Now()
	s := fairCostScheduler(waiting, t0)
	var reps []float64
	for i := range 5 {
		now := t0.Add(time.Duration(i+1) * time.Second) // no figures reused from the last scrape
		start := time.Now()
		s.Models(now)
		for j := range 20 {
			s.Flow(fairCostKey(j), now)
		}
		reps = append(reps, float64(time.Since(start).Microseconds()))
	}
	return Median(reps)
}

// fairIdleMemory has n buckets each run a request and go idle, and
// returns the heap they hold while recent and once forgotten (after
// DefaultForgetAfter), in bytes, and how many are still known then.
func fairIdleMemory(n int) (held, after uint64, known int) {
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	t0 := time.Now()
	s := fairshare.New(0)
	for i := range n {
		k := fairCostKey(i)
		s.Join(k, 1, 1, t0)
		s.Grant(k)
		s.Start(k, float64(1+i%7), t0)
		s.Done(k, t0)
		s.Idle(k)
	}
	held = heap() - min(base, heap())
	later := t0.Add(fairshare.DefaultForgetAfter + fairshare.DefaultActiveWindow)
	s.Models(later)
	for i := range n {
		if _, ok := s.Flow(fairCostKey(i), later); ok {
			known++
		}
	}
	after = heap() - min(base, heap())
	runtime.KeepAlive(s)
	return held, after, known
}

// fairCostBar adds the scheduler's costs at fairCostBuckets buckets.
func fairCostBar(res *ScenarioResult) {
	ns := fairGrantCost(fairCostBuckets)
	res.metric("grant_ns_10k", ns)
	res.bar(fmt.Sprintf("cost: a grant with %d buckets waiting (pick, room decision, grant and its hold)", fairCostBuckets),
		"< 1 µs", fmt.Sprintf("%.0f ns (median of 5, testing.Benchmark in the harness, timed in batches of %d grants)", ns, fairGrantBatch), ns < 1000)
	us := fairScrapeCost(fairCostBuckets)
	res.metric("scrape_us_10k", us)
	res.bar(fmt.Sprintf("cost: what a metrics scrape reads of the scheduler with %d buckets waiting (every model's figures and 20 buckets')", fairCostBuckets),
		"< 10 ms", fmt.Sprintf("%.0f µs (median of 5)", us), us < 10000)
	held, after, known := fairIdleMemory(fairCostBuckets)
	res.metric("idle_heap_held_bytes_10k", float64(held))
	res.metric("idle_heap_after_bytes_10k", float64(after))
	res.bar(fmt.Sprintf("memory: %d buckets that ran a request each, %s after they went idle", fairCostBuckets, fairshare.DefaultForgetAfter),
		"bounded: forgotten", fmt.Sprintf("%d still known; heap %.1f MiB while recent, %.2f MiB after", known,
			float64(held)/(1<<20), float64(after)/(1<<20)), known == 0)
}
