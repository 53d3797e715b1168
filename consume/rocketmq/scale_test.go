package rocketmq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/rocketmq"
)

// TestWatchdogHealsLostSubscription drops a LiteTopic's subscription on
// the broker and in the client while the backend still counts it as
// subscribed (what the client's sync race, a lost dispatch or an expiry
// leave behind): the next message is delivered anyway, within the stall
// bound plus one sweep and one RPC, because the watchdog subscribes it
// again.
func TestWatchdogHealsLostSubscription(t *testing.T) {
	in := sharedInstance(t)
	lt := liteTopic(in.b, "wd")
	waits.exemptTopic(lt) // bounded here, tighter
	got := make(chan time.Time, 2)
	defer in.r.set(lt, func(context.Context, *consume.Delivery) consume.Result {
		got <- time.Now()
		return consume.Success()
	})()
	publish(t, in.b, message("wd1-"+runID, lt))
	recv(t, got, deliveryTimeout, "first delivery")
	before := in.b.WatchdogStats().Kicks
	limit := rocketmq.StallBound(in.b) + 2*time.Second // a sweep and an RPC
	if max := rocketmq.DefaultStallAfter + 8*time.Second; limit > max {
		t.Fatalf("stall bound %s: the delivery lag of earlier tests has not settled", limit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if err := rocketmq.DropOnBroker(ctx, in.b, lt, limit); err != nil {
		t.Fatalf("UnSubscribeLite behind the backend's back: %v", err)
	}
	t0 := time.Now()
	publish(t, in.b, message("wd2-"+runID, lt))
	at := recv(t, got, deliveryTimeout, "delivery after the subscription was lost")
	took := at.Sub(t0)
	kicks := in.b.WatchdogStats().Kicks - before
	t.Logf("delivered %s after the publish to a LiteTopic whose subscription was lost; %d watchdog kicks", took.Round(time.Millisecond), kicks)
	if kicks < 1 {
		t.Errorf("no watchdog kick: delivered without one?")
	}
	if took > limit {
		t.Errorf("delivered after %s, want ≤ %s (the stall bound + a sweep + an RPC)", took, limit)
	}
}

// burstSize is how many new LiteTopics TestColdStartBurst publishes to at
// once (PACEGATE_ROCKETMQ_BURST; 300 by default, which the suite affords).
func burstSize() int {
	if n, err := strconv.Atoi(os.Getenv("PACEGATE_ROCKETMQ_BURST")); err == nil && n > 0 {
		return n
	}
	return 300
}

// TestColdStartBurst publishes the first message of many new LiteTopics
// at the same moment, each from its own goroutine (a burst of new tenants
// through one gateway): no publish fails (a 503 is for a broker that is
// really down), and each message is delivered.
func TestColdStartBurst(t *testing.T) {
	in := sharedInstance(t)
	n := burstSize()
	type arrival struct {
		id string
		at time.Time
	}
	got := make(chan arrival, n)
	lts := make([]string, n)
	for i := range lts {
		lts[i] = liteTopic(in.b, fmt.Sprintf("burst%d", i))
		defer in.r.set(lts[i], func(_ context.Context, d *consume.Delivery) consume.Result {
			got <- arrival{d.ID, time.Now()}
			return consume.Success()
		})()
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	pubAt := make([]time.Time, n)
	pubTook := make([]time.Duration, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			m := message(fmt.Sprintf("burst-%s-%d", runID, i), lts[i])
			err := in.b.Publish(t.Context(), m)
			pubTook[i] = time.Since(t0)
			if err != nil {
				failed.Add(1)
				errs <- err
				return
			}
			pubAt[i] = time.Now()
			waits.published(m.ID)
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Publish in the burst: %v", err)
	}
	var lat []time.Duration
	for range n - int(failed.Load()) {
		a := recv(t, got, deliveryTimeout, fmt.Sprintf("burst delivery (%d of %d)", len(lat), n))
		var i int
		fmt.Sscanf(a.id[len("burst-"+runID+"-"):], "%d", &i)
		lat = append(lat, a.at.Sub(pubAt[i]))
	}
	t.Logf("cold-start burst of %d new LiteTopics: %d publishes failed; publish took p50 %s p99 %s max %s; publish→deliver p50 %s p99 %s max %s; all delivered %s after the burst began; watchdog %+v",
		n, failed.Load(), percentile(pubTook, .5), percentile(pubTook, .99), percentile(pubTook, 1),
		percentile(lat, .5), percentile(lat, .99), percentile(lat, 1), time.Since(t0).Round(time.Millisecond), in.b.WatchdogStats())
}

// TestIdleUnsubscribeAndQuota runs a backend limited to 3 LiteTopics that
// unsubscribes them after 1 s idle: a fourth LiteTopic is refused with a
// FullError (429) while three are in use, and accepted once the idle ones
// were unsubscribed; a LiteTopic unsubscribed while idle is subscribed
// again on its next message, which is delivered.
func TestIdleUnsubscribeAndQuota(t *testing.T) {
	cfg := testConfig(t, "q"+runID)
	cfg.MaxLiteTopics = 3
	cfg.IdleUnsubscribe = time.Second
	b, err := rocketmq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	extraClose = append(extraClose, b)
	in := &instance{b: b, r: &router{m: map[string]consume.Handler{}}}
	if err := b.Start(in.r.handle); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b, 60*time.Second)
	got := make(chan string, 10)
	var lts []string
	for i := range 4 {
		lt := liteTopic(b, fmt.Sprintf("quota%d", i))
		lts = append(lts, lt)
		defer in.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
			got <- d.ID
			return consume.Success()
		})()
	}
	for i := range 3 {
		publish(t, b, message(fmt.Sprintf("quota-%s-%d", runID, i), lts[i]))
	}
	err = b.Publish(t.Context(), message("quota-"+runID+"-x", lts[3]))
	fe, full := consume.IsFull(err)
	if !full || fe.Scope != consume.ScopeEngine || fe.Limit != 3 || fe.LiteTopic != lts[3] || errors.Is(err, consume.ErrUnavailable) {
		t.Fatalf("Publish to a 4th LiteTopic = %v, want an engine FullError with limit 3 on %s", err, lts[3])
	}
	for range 3 {
		recv(t, got, deliveryTimeout, "delivery")
	}
	deadline := time.Now().Add(10 * time.Second)
	for s := b.WatchdogStats(); s.Subscribed > 0; s = b.WatchdogStats() {
		if time.Now().After(deadline) {
			t.Fatalf("idle LiteTopics still subscribed after 10 s: %+v", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	publish(t, b, message("quota-"+runID+"-y", lts[3]))
	if id := recv(t, got, deliveryTimeout, "delivery on the 4th LiteTopic"); id != "quota-"+runID+"-y" {
		t.Fatalf("delivered %s", id)
	}
	publish(t, b, message("quota-"+runID+"-z", lts[0])) // unsubscribed while idle: subscribed again
	if id := recv(t, got, deliveryTimeout, "delivery on a LiteTopic unsubscribed while idle"); id != "quota-"+runID+"-z" {
		t.Fatalf("delivered %s", id)
	}
	t.Logf("watchdog: %+v", b.WatchdogStats())
}

// TestOneInFlightPerLiteTopic: the handler never runs twice at once for
// one LiteTopic ([consume.Handler]'s contract), and a LiteTopic's
// messages arrive in publish order. Both hold with two broker groups
// too: the proxy routes a Lite message (it carries no message group) to
// a queue chosen by a consistent hash of the LiteTopic name, so all of
// one LiteTopic's messages land on one broker; the test pins that down
// rather than trusting it.
func TestOneInFlightPerLiteTopic(t *testing.T) {
	in := sharedInstance(t)
	lt := liteTopic(in.b, "one")
	const n = 40
	var running, maxRunning atomic.Int64
	order := make(chan string, 2*n)
	defer in.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
		now := running.Add(1)
		defer running.Add(-1)
		for m := maxRunning.Load(); now > m && !maxRunning.CompareAndSwap(m, now); m = maxRunning.Load() {
		}
		time.Sleep(5 * time.Millisecond) // a short handler, long enough to overlap a second delivery
		order <- d.ID
		return consume.Success()
	})()
	// Sequential publishes first (their order is defined), then
	// concurrent ones (their order is not, but the count is).
	for i := range n / 2 {
		publish(t, in.b, message(fmt.Sprintf("one-%s-%02d", runID, i), lt))
	}
	var wg sync.WaitGroup
	for i := n / 2; i < n; i++ {
		wg.Go(func() { publish(t, in.b, message(fmt.Sprintf("one-%s-%02d", runID, i), lt)) })
	}
	wg.Wait()
	var got []string
	for range n {
		got = append(got, recv(t, order, deliveryTimeout, "delivery"))
	}
	if m := maxRunning.Load(); m > 1 {
		t.Errorf("%d handler calls ran at once for one LiteTopic, want 1", m)
	}
	outOfOrder := 0
	for i, id := range got[:n/2] {
		if id != fmt.Sprintf("one-%s-%02d", runID, i) {
			outOfOrder++
		}
	}
	t.Logf("%d messages: at most %d handler calls at once; %d of the %d published one after another delivered out of order", n, maxRunning.Load(), outOfOrder, n/2)
	if outOfOrder > 0 {
		t.Errorf("%d of the %d messages published one after another were delivered out of order: %v", outOfOrder, n/2, got[:n/2])
	}
}
