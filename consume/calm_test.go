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
	batch int
	mu    sync.Mutex
	asked []calmAsk
}

type calmAsk struct {
	factor float64
	own    int
}

func (u *calmUpstreams) Calm(_ string, factor float64, own int) (running, calm int) {
	u.mu.Lock()
	u.asked = append(u.asked, calmAsk{factor, own})
	u.mu.Unlock()
	u.fakeUpstreams.mu.Lock()
	defer u.fakeUpstreams.mu.Unlock()
	return u.inUse, min(u.limit, u.batch)
}

// While a high-band tenant is active, a normal one starts a request only
// while the batch, with room for the requests the high tenant's clients
// are between, stays within the high band's slowdown (here 3 of the 4
// slots): the slot freed by the high tenant's own request is kept for
// its next one, which takes it past the waiting normal tenant; the next
// slot freed within the calm batch goes to the normal tenant. Once the
// high tenant has been gone for DefaultActiveWindow the normal tenant
// takes every slot. With no bound, the same requests run at once.
func TestAHighBandKeepsTheBatchCalm(t *testing.T) {
	for _, bound := range []float64{1.25, 0} {
		synctest.Test(t, func(t *testing.T) { keepsTheBatchCalm(t, bound) })
	}
}

func keepsTheBatchCalm(t *testing.T, bound float64) {
	b := &wakeableBackend{fakeBackend{min: time.Millisecond}}
	up := &calmUpstreams{batch: 3}
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
	woken := func(step string, want ...string) {
		t.Helper()
		if got := b.wokenList(); !slices.Equal(got, want) {
			t.Fatalf("%s: woken %v, want %v", step, got, want)
		}
	}
	calm := bound > 0
	n1, res := handle("n", 1)
	want("normal alone", res, true)
	h1, res := handle("hi", 0)
	want("high beside it", res, true)
	h2, res := handle("hi", 0)
	want("high's second stream", res, true)
	n2, res := handle("n", 1)
	want("normal with the batch at 3 of 4", res, !calm)
	if !calm {
		return
	}
	calls.end(h1.ID)
	synctest.Wait()
	woken("high between two requests")
	h3, res := handle("hi", 0)
	want("high's next request, past the waiting normal tenant", res, true)
	calls.end(n1.ID)
	synctest.Wait()
	woken("the batch fell to 2", "n__m")
	want("normal with its grant", r.c.Handle(ctx, n2), true)
	calls.end(h2.ID)
	calls.end(h3.ID)
	synctest.Wait()
	n3, res := handle("n", 1)
	want("normal with high gone for less than the window", res, false)
	time.Sleep(fairshare.DefaultActiveWindow + 2*time.Millisecond)
	synctest.Wait()
	woken("after the high tenant's window", "n__m", "n__m")
	want("normal once the high tenant has gone", r.c.Handle(ctx, n3), true)
	up.mu.Lock()
	asked := slices.Compact(up.asked)
	up.mu.Unlock()
	// Whenever a normal request asked, the high band ran or was between
	// 2 requests.
	if want := []calmAsk{{1.25, 2}}; !slices.Equal(asked, want) {
		t.Fatalf("Calm asked %v, want %v", asked, want)
	}
}
