package consume

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// A bucket whose queue empties is idle to the fair share, whichever way
// its last request leaves: dispatched (the consumer says so with the
// request's start) or withdrawn (its handler finished it). Its next Join
// is then a return from idleness, lifted to its band's virtual time.
func TestABucketWhoseQueueEmptiesIsIdle(t *testing.T) {
	for _, leave := range []string{"dispatched", "withdrawn"} {
		t.Run(leave, func(t *testing.T) {
			r, b, release, ds, ps := inLine(t, "b")
			db, pb := ds[0], ps[0]
			drain(pb)
			if f := r.flow("b"); !f.Backlogged || !f.Waiting {
				t.Fatalf("b waiting: %+v, want waiting and backlogged", f)
			}
			if leave == "dispatched" {
				close(release) // a ends: its slot is granted to b
				waitFor(t, func() bool { return slices.Equal(b.wokenList(), []string{"b__m"}) })
				if res := r.c.Handle(context.Background(), db); res.Action != ActionSuccess {
					t.Fatalf("b with its grant: %v, want dispatched", res)
				}
			} else {
				r.q.Finish(pb)
				close(release)
			}
			if f := r.flow("b"); f.Backlogged || f.Waiting {
				t.Fatalf("b %s with nothing left queued: %+v, want neither waiting nor backlogged", leave, f)
			}
			r.c.Close(context.Background())
		})
	}
}

// flow is the fair share's view of tenant's bucket of model m.
func (r *rig) flow(tenant string) fairshare.FlowStat {
	f, _ := r.c.Fairness().Flow(policy.Key{Tenant: tenant, Model: "m"}, time.Now())
	return f
}
