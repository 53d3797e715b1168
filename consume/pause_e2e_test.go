package consume_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

// fixedRates is a RateSource with one rate for every bucket.
type fixedRates float64

func (r fixedRates) BaseRate(policy.Key) (float64, bool) { return float64(r), false }

// countingGateway is the gateway's queue side with the real Pacer, and
// a count of the handler's calls per request.
type countingGateway struct {
	gateway
	pacer *policy.Pacer
	c     *consume.Consumer
	mu    sync.Mutex
	calls map[string]int
}

// newCounting builds a countingGateway whose engine has not started:
// requests queued before run are all waiting when the first is delivered.
func newCounting(rate float64) *countingGateway {
	e := embedded.New(embedded.Config{Logger: quiet})
	g := &countingGateway{gateway: gateway{e: e, q: consume.NewQueue(e, "")}, pacer: policy.NewPacer(fixedRates(rate)),
		calls: map[string]int{}}
	g.pacer.OnChange(g.q.WakeSuspended) // as the app wires it
	g.c = consume.NewConsumer(consume.ConsumerConfig{Queue: g.q, Pacer: g.pacer, Upstreams: instantUpstreams{}, Logger: quiet})
	return g
}

// run starts the engine.
func (g *countingGateway) run(t *testing.T) {
	err := g.e.Start(func(ctx context.Context, d *consume.Delivery) consume.Result {
		g.mu.Lock()
		g.calls[d.ID]++
		g.mu.Unlock()
		return g.c.Handle(ctx, d)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// queue submits n requests to k, ids 0..n-1.
func (g *countingGateway) queue(t *testing.T, k policy.Key, n int) []*consume.Pending {
	var pend []*consume.Pending
	for i := range n {
		p, err := g.submit(context.Background(), k, strconv.Itoa(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	return pend
}

// startBacklog queues n requests in one bucket paced at rate, then
// starts the engine: all n wait when the first is delivered. It returns
// the gateway, the start and the requests.
func startBacklog(t *testing.T, rate float64, n int) (*countingGateway, time.Time, []*consume.Pending) {
	g := newCounting(rate)
	start := time.Now()
	pend := g.queue(t, policy.Key{Tenant: "acme", Model: "llama"}, n)
	g.run(t)
	return g, start, pend
}

// releasedAt reads each request's response and returns when each was
// released, from start.
func releasedAt(t *testing.T, start time.Time, pend []*consume.Pending) []time.Duration {
	var at []time.Duration
	for i, p := range pend {
		for ev := range p.Events() {
			if ev.Kind == consume.EventError {
				t.Fatalf("%d: %v", i, ev.Err)
			}
			if ev.Kind == consume.EventDone {
				break
			}
		}
		at = append(at, p.ReleasedAt().Sub(start))
	}
	return at
}

// A bucket paced at 10/s with five requests waiting releases one every
// 100 ms, and each request is delivered once: after a release, the
// bucket's LiteTopic pauses until its next slot instead of delivering
// the next request only to suspend it.
func TestAPacedBacklogIsDeliveredOnceARequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, start, pend := startBacklog(t, 10, 5)
		at := releasedAt(t, start, pend)
		for i, a := range at {
			if want := time.Duration(i) * 100 * time.Millisecond; a != want {
				t.Errorf("%d released at %v, want %v", i, a, want)
			}
		}
		g.stop(t, g.c)
		want := map[string]int{"0": 1, "1": 1, "2": 1, "3": 1, "4": 1}
		if !maps.Equal(g.calls, want) {
			t.Errorf("deliveries per request %v, want %v", g.calls, want)
		}
	})
}

// A rate increase reaches a paused bucket at once: the pause is a
// suspension, and the change wakes it.
func TestARateIncreaseEndsAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, start, pend := startBacklog(t, 10, 3)
		synctest.Wait() // the first released, the bucket paused for 100 ms
		time.Sleep(20 * time.Millisecond)
		g.pacer.SetGlobalFactor(10) // 100/s: the next slots are at 10 and 20 ms, the late one made up at once
		at := releasedAt(t, start, pend)
		if want := []time.Duration{0, 20 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(at, want) {
			t.Errorf("released at %v, want %v", at, want)
		}
		g.stop(t, g.c)
	})
}
