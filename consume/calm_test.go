package consume

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
)

// calmUpstreams are fakeUpstreams whose servers run within a slowdown
// factor up to a batch of batch requests.
type calmUpstreams struct {
	*fakeUpstreams
	batch   int
	mu      sync.Mutex
	factors []float64 // asked of Calm
}

func (u *calmUpstreams) Calm(_ string, factor float64) (running, calm int) {
	u.mu.Lock()
	u.factors = append(u.factors, factor)
	u.mu.Unlock()
	u.fakeUpstreams.mu.Lock()
	defer u.fakeUpstreams.mu.Unlock()
	return u.inUse, min(u.limit, u.batch)
}

// While a high-band tenant is active, a normal one starts a request only
// while the batch stays within the high band's slowdown (here 2 of the 4
// slots); the slot freed by the high tenant's own request does not go to
// it, the next freed within the calm batch does. Once the high tenant has
// been gone for DefaultActiveWindow the normal tenant takes every slot.
// With no bound, the same requests run at once.
func TestAHighBandKeepsTheBatchCalm(t *testing.T) {
	for _, bound := range []float64{1.25, 0} {
		synctest.Test(t, func(t *testing.T) { keepsTheBatchCalm(t, bound) })
	}
}

func keepsTheBatchCalm(t *testing.T, bound float64) {
	b := &wakeableBackend{fakeBackend{min: time.Millisecond}}
	up := &calmUpstreams{batch: 2}
	r := newRigWith(b, nil, func(c *ConsumerConfig) {
		up.fakeUpstreams = c.Upstreams.(*fakeUpstreams)
		c.Upstreams, c.MaxSlowdown = up, [fairshare.NumBands]float64{bound}
	})
	r.up.limit = 4
	calls := holdCalls(r.up)
	ctx := context.Background()
	defer func() {
		calls.endAll()
		r.c.Close(ctx)
	}()
	handle := func(tenant string, band int) (*Delivery, Result) {
		d, p := r.submitIn(ctx, tenant, "m", band)
		drain(p)
		res := r.c.Handle(ctx, d)
		synctest.Wait()
		return d, res
	}
	want := func(step string, res Result, run bool) {
		t.Helper()
		if run && res.Action != ActionSuccess || !run && res != Suspend(capacityWaitWakeable) {
			t.Fatalf("bound %v, %s: %v, want run %v", bound, step, res, run)
		}
	}
	calm := bound > 0
	n1, res := handle("n", 1)
	want("normal alone", res, true)
	h1, res := handle("hi", 0)
	want("high beside it", res, true)
	n2, res := handle("n", 1)
	want("normal with the batch at 2 of 4", res, !calm)
	h2, res := handle("hi", 0)
	want("high with the batch at 2 or 3", res, true)
	if !calm {
		return
	}
	calls.end(h1.ID)
	synctest.Wait()
	if got := b.wokenList(); len(got) != 0 {
		t.Fatalf("woken %v with the batch still at 2, want none", got)
	}
	calls.end(n1.ID)
	synctest.Wait()
	if got := b.wokenList(); !slices.Equal(got, []string{"n__m"}) {
		t.Fatalf("woken %v once the batch fell to 1, want [n__m]", got)
	}
	want("normal with its grant", r.c.Handle(ctx, n2), true)
	calls.end(h2.ID)
	synctest.Wait()
	_, res = handle("n", 1)
	want("normal with the batch at 1, high just gone", res, true)
	n4, res := handle("n", 1)
	want("normal with the batch at 2, high gone for less than the window", res, false)
	time.Sleep(fairshare.DefaultActiveWindow + 2*time.Millisecond)
	synctest.Wait()
	if got := b.wokenList(); !slices.Equal(got, []string{"n__m", "n__m"}) {
		t.Fatalf("woken %v after the high tenant's window, want [n__m n__m]", got)
	}
	want("normal once the high tenant has gone", r.c.Handle(ctx, n4), true)
	up.mu.Lock()
	asked := slices.Compact(up.factors)
	up.mu.Unlock()
	if !slices.Equal(asked, []float64{1.25}) {
		t.Fatalf("Calm asked for factors %v, want [1.25]", asked)
	}
}
