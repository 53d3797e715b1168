package consume

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// A bucket whose only waiting request leaves (its client went away, or
// its band's max_wait passed) leaves the wait set at once: the next slot
// that frees goes to the next bucket, not to a bucket with nothing to run.
func TestWaitersThatLeaveLeaveTheWaitSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, b, release, ds, ps := inLine(t, "b", "c")
		dc, pb := ds[1], ps[0]
		r.q.Finish(pb) // b's client leaves
		if r.c.Fairness().Waits(pb.Req.Key) {
			t.Fatal("b still in the wait set after its only request left")
		}
		close(release)
		synctest.Wait()
		if got := b.wokenList(); !slices.Equal(got, []string{"c__m"}) {
			t.Fatalf("woken %v, want [c__m]: the slot goes to c at once", got)
		}
		if res := r.c.Handle(context.Background(), dc); res.Action != ActionSuccess {
			t.Fatalf("c with its grant: %v, want dispatched", res)
		}
		r.c.Close(context.Background())
	})
}

// A slot granted to a bucket whose request then leaves is given back at
// once and granted to the next bucket, not held for the grant's hold.
func TestGrantToABucketThatLeftMovesOnAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, b, release, ds, ps := inLine(t, "b", "c")
		dc, pb := ds[1], ps[0]
		close(release)
		synctest.Wait()
		if got := b.wokenList(); !slices.Equal(got, []string{"b__m"}) {
			t.Fatalf("woken %v, want [b__m]", got)
		}
		start := time.Now()
		r.q.Finish(pb) // b leaves before it claims its grant
		synctest.Wait()
		if got := b.wokenList(); !slices.Equal(got, []string{"b__m", "c__m"}) || time.Since(start) != 0 {
			t.Fatalf("woken %v after %v, want [b__m c__m] at once", got, time.Since(start))
		}
		if res := r.c.Handle(context.Background(), dc); res.Action != ActionSuccess {
			t.Fatalf("c with its grant: %v, want dispatched", res)
		}
		r.c.Close(context.Background())
	})
}

// inLine is a fair-mode rig on a wakeable backend whose pool has one
// slot, held by tenant a's stream until release is closed, with one
// request of each of tenants delivered and waiting for it, in order.
func inLine(t *testing.T, tenants ...string) (*rig, *wakeableBackend, chan struct{}, []*Delivery, []*Pending) {
	t.Helper()
	b := &wakeableBackend{fakeBackend{min: time.Millisecond}}
	r := newRigOn(b, nil, CapacityFair)
	r.up.limit = 1
	release := make(chan struct{})
	streamTokens(r.up, nil, 0, release)
	first, p := r.submit(context.Background(), "a")
	drain(p)
	r.c.Handle(context.Background(), first)
	var ds []*Delivery
	var ps []*Pending
	for _, tenant := range tenants {
		d, p := r.submit(context.Background(), tenant)
		r.c.Handle(context.Background(), d) // waits for the slot
		ds, ps = append(ds, d), append(ps, p)
	}
	return r, b, release, ds, ps
}
