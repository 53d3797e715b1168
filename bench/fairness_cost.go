package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// fairGrantCost measures one grant decision of the fair-share scheduler
// with waiting buckets waiting: pick the bucket owed the most, grant it,
// charge and finish its request, and let it join again (the whole cycle a
// freed slot causes), in ns, median of 5 runs.
func fairGrantCost(waiting int) float64 {
	s := fairshare.New(0)
	t0 := time.Now()
	for i := range waiting {
		s.Join(policy.Key{Tenant: fmt.Sprint("t", i), Model: "m"}, 1, 1, t0)
	}
	models := []string{"m"}
	var reps []float64
	for range 5 {
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				k, _ := s.Best(models)
				s.Grant(k)
				s.Start(k, 100, t0)
				s.Done(k, t0)
				s.Join(k, 1, 1, t0)
			}
		})
		reps = append(reps, float64(r.NsPerOp()))
	}
	return Median(reps)
}

// fairCostBar adds the grant decision's cost at 10,000 waiting buckets.
func fairCostBar(res *ScenarioResult) {
	const waiting = 10000
	ns := fairGrantCost(waiting)
	res.metric("grant_decision_ns_10k", ns)
	res.bar(fmt.Sprintf("cost: a grant decision with %d waiting buckets (pick, grant, charge, rejoin)", waiting),
		"< 1 µs", fmt.Sprintf("%.0f ns (median of 5, testing.Benchmark in the harness)", ns), ns < 1000)
}
