package consume

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A slot freed on an upstream that serves three models goes to the
// bucket first in the fair order across them all: of two buckets of
// different models at the same counter, the one that joined first, whichever
// model's name sorts first.
func TestAFreedSlotGoesToTheBestBucketAcrossTheUpstreamsModels(t *testing.T) {
	b := &wakeableBackend{fakeBackend{min: time.Millisecond}}
	r := newRigOn(b, nil, CapacityFair)
	r.up.limit, r.up.models = 1, []string{"o", "n", "m"}
	release := make(chan struct{})
	streamTokens(r.up, nil, 1, release)
	ctx := context.Background()

	holder, p := r.submitFor(ctx, "t", "o")
	drain(p)
	if res := r.c.Handle(ctx, holder); res.Action != ActionSuccess {
		t.Fatalf("the first request: %v, want dispatched", res)
	}
	first, p := r.submitFor(ctx, "lora", "n")
	drain(p)
	second, p := r.submitFor(ctx, "x", "m")
	drain(p)
	for _, d := range []*Delivery{first, second} {
		if res := r.c.Handle(ctx, d); res != Suspend(capacityWaitWakeable) {
			t.Fatalf("%s with the pool full: %v, want to wait for a grant", d.ID, res)
		}
	}
	close(release)
	waitFor(t, func() bool { return len(b.wokenList()) == 1 })
	if got := b.wokenList(); !slices.Equal(got, []string{"lora__n"}) {
		t.Fatalf("woken %v, want [lora__n]", got)
	}
	if res := r.c.Handle(ctx, first); res.Action != ActionSuccess {
		t.Fatalf("lora with its grant: %v, want dispatched", res)
	}
	r.c.Close(ctx)
}

// One model's gate held (a grant being decided, say) does not hold up a
// delivery of another model: each model has a lock of its own. With one
// lock for every model this test would never end.
func TestOneModelsGateDoesNotHoldUpAnother(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	held := r.c.cap.lock("other")
	d, p := r.submit(context.Background(), "acme")
	drain(p)
	res := r.c.Handle(context.Background(), d)
	held.mu.Unlock()
	if res.Action != ActionSuccess {
		t.Fatalf("a request of model m while model other's gate is held: %v, want dispatched", res)
	}
	r.c.Close(context.Background())
}

// The grants trim keeps for a bucket can grow again (hand appends to
// them under the gate's lock) while those it gave back are still being
// released outside it: the next grant must not land on a given-back one.
func TestTrimmedGrantsAreNotOverwrittenByTheNextGrant(t *testing.T) {
	a, b, c := &grant{}, &grant{}, &grant{}
	keep, extra := splitGrants([]*grant{a, b, c}, 1)
	keep = append(keep, &grant{})
	if extra[0] != b || extra[1] != c || keep[0] != a {
		t.Fatalf("after a grant was appended to the kept ones, the given-back grants are %p %p, want %p %p", extra[0], extra[1], b, c)
	}
}
