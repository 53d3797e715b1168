package consume

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// heldCalls makes the fake upstream answer each request with a header
// and hold it until its id is released (or its context ends).
type heldCalls struct {
	mu    sync.Mutex
	ends  map[string]chan struct{}
	ended map[string]bool
	all   bool // endAll was called: every call returns at once
}

func holdCalls(up *fakeUpstreams) *heldCalls {
	h := &heldCalls{ends: map[string]chan struct{}{}, ended: map[string]bool{}}
	up.do = func(ctx context.Context, req *Request, emit func(Event) error) error {
		emit(Event{Kind: EventHeader, Status: 200})
		select {
		case <-h.wait(req.ID):
		case <-ctx.Done():
		}
		return nil
	}
	return h
}

func (h *heldCalls) wait(id string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.channel(id)
}

// channel requires mu held.
func (h *heldCalls) channel(id string) chan struct{} {
	if h.ends[id] == nil {
		h.ends[id] = make(chan struct{})
		if h.all {
			h.ended[id] = true
			close(h.ends[id])
		}
	}
	return h.ends[id]
}

// end lets request id's call return.
func (h *heldCalls) end(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ended[id] {
		h.ended[id] = true
		close(h.channel(id))
	}
}

// endAll lets every call return, those still to come included.
func (h *heldCalls) endAll() {
	h.mu.Lock()
	h.all = true
	ids := make([]string, 0, len(h.ends))
	for id := range h.ends {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.end(id)
	}
}

func (up *fakeUpstreams) inFlight() int {
	up.mu.Lock()
	defer up.mu.Unlock()
	return up.inUse
}

// With headroom, a bucket below its share finds every slot taken by a
// heavier bucket and still starts at once, beyond the limit; the room it
// leaves when its request ends is not handed to the heavy bucket, so its
// next request starts at once too. The heavy bucket gets the next slot
// that frees within the limit once the light bucket's room is kept.
func TestHeadroomStartsABucketBelowItsShareAtOnce(t *testing.T) {
	b := &wakeableBackend{fakeBackend{min: time.Millisecond}}
	r := newRigWith(b, nil, func(c *ConsumerConfig) { c.Headroom = 1 })
	r.up.limit, r.up.headroom = 2, 1
	calls := holdCalls(r.up)
	ctx := context.Background()
	handle := func(tenant string) (*Delivery, Result) {
		d, p := r.submit(ctx, tenant)
		drain(p)
		return d, r.c.Handle(ctx, d)
	}
	h1, res1 := handle("heavy")
	_, res2 := handle("heavy")
	if res1.Action != ActionSuccess || res2.Action != ActionSuccess {
		t.Fatalf("heavy's first two requests: %v %v, want both dispatched", res1, res2)
	}
	h3, res := handle("heavy")
	if res != Suspend(capacityWaitWakeable) {
		t.Fatalf("heavy's third request with the limit reached: %v, want to wait", res)
	}
	l1, res := handle("light")
	if res.Action != ActionSuccess || r.up.inFlight() != 3 {
		t.Fatalf("light with every slot taken: %v, %d in flight; want dispatched in the headroom, 3 in flight", res, r.up.inFlight())
	}
	calls.end(l1.ID)
	waitFor(t, func() bool { return r.up.inFlight() == 2 })
	// heavy runs 2 of total 2 and light, paused, is owed its share of 1:
	// heavy's waiting request is not woken into the room light left, and
	// light's next request takes it.
	l2, res := handle("light")
	if res.Action != ActionSuccess || r.up.inFlight() != 3 {
		t.Fatalf("light's next request: %v, %d in flight; want dispatched at once, 3 in flight", res, r.up.inFlight())
	}
	if got := b.wokenList(); len(got) != 0 {
		t.Fatalf("woken %v while no slot within the limit freed, want none", got)
	}
	calls.end(h1.ID)
	calls.end(l2.ID)
	waitFor(t, func() bool { return len(b.wokenList()) == 1 })
	if got := b.wokenList(); !slices.Equal(got, []string{"heavy__m"}) {
		t.Fatalf("woken %v, want [heavy__m]", got)
	}
	if res := r.c.Handle(ctx, h3); res.Action != ActionSuccess {
		t.Fatalf("heavy's third request with its grant: %v, want dispatched", res)
	}
	calls.endAll()
	r.c.Close(ctx)
}
