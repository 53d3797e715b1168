package rocketmq_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/rocketmq"
)

// slotPacer releases one request per interval on an exact schedule
// (start + k·interval), so late releases do not accumulate.
type slotPacer struct {
	mu       sync.Mutex
	interval time.Duration
	start    time.Time
	k        int
}

// acquireOrSuspend returns 0 and takes the next slot, or the wait until it.
func (p *slotPacer) acquireOrSuspend(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		p.start, p.k = now, 1
		return 0
	}
	if wait := p.start.Add(time.Duration(p.k) * p.interval).Sub(now); wait > 0 {
		return wait
	}
	p.k++
	return 0
}

// TestSuspendPacing drains a pre-filled LiteTopic through a handler that
// suspends until the next slot: the broker holds each wait.
//
// The 5.5.1 broker sometimes misses a long poll's wake-up (notes §8.2:
// PopLiteLongPollingService does not look at the event queue again after it
// registers a poll), and then every LiteTopic of the client waits until the
// watchdog subscribes it again, StallAfter (2 s) later. One such miss in
// the 6 s run costs the 10 % the pacing is allowed; it is the broker's
// race, healed by the watchdog (TestWatchdogHealsLostSubscription), not a pacing
// error. So a run during which the watchdog re-subscribed a LiteTopic is
// logged and measured again on a fresh LiteTopic, once; any other run, and
// the second, is judged.
func TestSuspendPacing(t *testing.T) {
	in := sharedInstance(t)
	for _, tc := range []struct {
		rate float64 // requests/s
		n    int
	}{{2, 13}, {10, 61}} {
		t.Run(fmt.Sprintf("%g/s", tc.rate), func(t *testing.T) {
			t.Parallel()
			got, kicked := measurePacing(t, in, tc.rate, tc.n, 1)
			if kicked {
				t.Logf("the watchdog re-subscribed a stalled LiteTopic during the run (a missed broker wake-up): measuring again")
				got, _ = measurePacing(t, in, tc.rate, tc.n, 2)
			}
			if math.Abs(got/tc.rate-1) > 0.10 {
				t.Errorf("achieved %.3f/s, want %g/s ±10%%", got, tc.rate)
			}
		})
	}
}

// measurePacing publishes n messages to a fresh LiteTopic, releases them
// at rate through Suspend, and returns the achieved rate, and whether the
// watchdog re-subscribed any LiteTopic meanwhile.
func measurePacing(t *testing.T, in *instance, rate float64, n, attempt int) (float64, bool) {
	lt := liteTopic(in.b, fmt.Sprintf("pace%g-%d", rate, attempt))
	p := &slotPacer{interval: time.Duration(float64(time.Second) / rate)}
	released := make(chan time.Time, n)
	var suspends atomic.Int64
	defer in.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
		now := time.Now()
		if wait := p.acquireOrSuspend(now); wait > 0 {
			suspends.Add(1)
			return consume.Suspend(wait) // the backend raises it to 50 ms
		}
		released <- now
		return consume.Success()
	})()
	kicks := in.b.WatchdogStats().Kicks
	for i := range n {
		publish(t, in.b, message(fmt.Sprintf("pace-%s-%g-%d-%d", runID, rate, attempt, i), lt))
	}
	var first, last time.Time
	for i := range n {
		at := recv(t, released, time.Duration(float64(n)/rate*float64(time.Second))+deliveryTimeout, "release")
		if i == 0 {
			first = at
		}
		last = at
	}
	got := float64(n-1) / last.Sub(first).Seconds()
	kicked := in.b.WatchdogStats().Kicks > kicks
	t.Logf("attempt %d: configured %g/s, achieved %.3f/s over %d releases in %s (%d suspends, watchdog re-subscribed: %t)",
		attempt, rate, got, n, last.Sub(first).Round(time.Millisecond), suspends.Load(), kicked)
	return got, kicked
}

// TestSuspendIsolation is Suspend versus Sleep on the broker: while most
// LiteTopics are throttled with a Suspend per message, the others are
// dispatched as if nothing were throttled. A consumer that held its
// threads for the wait (a Sleep) would make a healthy delivery wait a
// whole Suspend; the bound is half of one, which CPU contention on a
// shared host stays far below (a bound relative to the unthrottled
// baseline compared two noisy measurements and failed on a loaded host
// at p90 266 ms against 218 ms).
func TestSuspendIsolation(t *testing.T) {
	in := sharedInstance(t)
	const (
		healthy   = 10
		throttled = 40
		rounds    = 6
		hold      = 2 * time.Second // each throttled message's Suspend
	)
	probe := make([]string, healthy)
	lat := make(chan time.Duration, healthy)
	for i := range probe {
		probe[i] = liteTopic(in.b, fmt.Sprintf("iso-ok%d", i))
		defer in.r.set(probe[i], func(_ context.Context, d *consume.Delivery) consume.Result {
			lat <- sinceProp(d)
			return consume.Success()
		})()
	}
	measure := func(phase string) []time.Duration {
		var ds []time.Duration
		for r := range rounds {
			for i, lt := range probe {
				publish(t, in.b, message(fmt.Sprintf("iso-%s-%s-%d-%d", runID, phase, r, i), lt))
			}
			for range probe {
				ds = append(ds, recv(t, lat, deliveryTimeout, phase+" probe delivery"))
			}
		}
		return ds
	}
	measure("warmup") // subscribes the probe LiteTopics
	base := measure("baseline")

	// Throttle 40 LiteTopics: each message is suspended once for hold, then
	// released; every LiteTopic keeps a backlog of 10 so it is throttled
	// all along (20 s each, far longer than the measurement).
	var suspends, releases atomic.Int64
	stop := make(chan struct{})
	var seen sync.Map
	for i := range throttled {
		lt := liteTopic(in.b, fmt.Sprintf("iso-slow%d", i))
		defer in.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
			select {
			case <-stop:
				return consume.Success()
			default:
			}
			if _, again := seen.LoadOrStore(d.ID, true); !again {
				suspends.Add(1)
				return consume.Suspend(hold)
			}
			releases.Add(1)
			return consume.Success()
		})()
		for j := range 10 {
			publish(t, in.b, message(fmt.Sprintf("iso-slow-%s-%d-%d", runID, i, j), lt))
		}
	}
	// Wait until the throttled LiteTopics are actually being suspended.
	deadline := time.Now().Add(30 * time.Second)
	for suspends.Load() < throttled {
		if time.Now().After(deadline) {
			t.Fatalf("only %d suspends after 30 s", suspends.Load())
		}
		recvOrTick(lat)
	}
	// A missed broker wake-up (see TestSuspendPacing) holds every probe of
	// a round for the watchdog's StallAfter, which alone puts the p90 over
	// the bound: a measurement during which the watchdog re-subscribed a
	// LiteTopic is logged and made again, once, and the second is judged.
	kicks := in.b.WatchdogStats().Kicks
	loaded := measure("throttled")
	if in.b.WatchdogStats().Kicks > kicks {
		t.Logf("the watchdog re-subscribed a stalled LiteTopic during the measurement (p90 %s): measuring again", percentile(loaded, .9))
		loaded = measure("throttled-again")
	}
	close(stop)
	t.Logf("healthy LiteTopics, publish→dispatch: baseline p50 %s p90 %s max %s; with %d throttled: p50 %s p90 %s max %s (%d suspends, %d releases meanwhile)",
		percentile(base, .5), percentile(base, .9), percentile(base, 1), throttled,
		percentile(loaded, .5), percentile(loaded, .9), percentile(loaded, 1), suspends.Load(), releases.Load())
	if n := releases.Load(); n >= throttled*10 {
		t.Errorf("all %d throttled messages were released by the end of the measurement: the throttled LiteTopics were not busy during it", n)
	}
	for _, c := range []struct {
		name string
		got  time.Duration
	}{{"p50", percentile(loaded, .5)}, {"p90", percentile(loaded, .9)}} {
		if c.got > hold/2 {
			t.Errorf("healthy %s %s with %d LiteTopics throttled, want ≤ %s (half a Suspend)", c.name, c.got, throttled, hold/2)
		}
	}
}

// recvOrTick waits for a value on ch or 50 ms, whichever comes first.
func recvOrTick[T any](ch <-chan T) {
	timer := time.NewTimer(50 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	}
}

// TestTwoReplicas: two backends (two replica ids) in one group; each
// receives exactly the LiteTopics it published to.
func TestTwoReplicas(t *testing.T) {
	a := sharedInstance(t)
	b := secondInstance(t)
	type got struct{ replica, lt, id string }
	deliveries := make(chan got, 100)
	const topics, per = 3, 10
	want := map[string]string{} // id → replica
	for _, in := range []*instance{a, b} {
		for i := range topics {
			lt := liteTopic(in.b, fmt.Sprintf("two%d", i))
			replica := in.b.ReplicaID()
			// Register the same LiteTopic name on both routers: a
			// delivery on the wrong replica would be recorded as such.
			for _, other := range []*instance{a, b} {
				rep := other.b.ReplicaID()
				defer other.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
					deliveries <- got{rep, d.LiteTopic, d.ID}
					return consume.Success()
				})()
			}
			for j := range per {
				id := fmt.Sprintf("two-%s-%s-%d-%d", runID, replica, i, j)
				want[id] = replica
				publish(t, in.b, message(id, lt))
			}
		}
	}
	seen := map[string]bool{}
	for len(seen) < len(want) {
		g := recv(t, deliveries, deliveryTimeout, fmt.Sprintf("deliveries (%d of %d)", len(seen), len(want)))
		if want[g.id] != g.replica {
			t.Errorf("%s (LiteTopic %s, published by %s) delivered to replica %s", g.id, g.lt, want[g.id], g.replica)
		}
		seen[g.id] = true
	}
	t.Logf("%d messages on %d LiteTopics per replica: each delivered once, to its own replica", len(want), topics)
}

var (
	secondOnce sync.Once
	second     *instance
	secondErr  error
)

func secondInstance(t *testing.T) *instance {
	t.Helper()
	secondOnce.Do(func() {
		second, secondErr = newInstance(t, "b"+runID)
		if secondErr == nil {
			extraClose = append(extraClose, second.b)
		}
	})
	if secondErr != nil || second == nil {
		t.Fatalf("second backend: %v", secondErr)
	}
	return second
}

// rmqScript is scripts/rocketmq/rmq.sh, from the env or the repo layout.
func rmqScript(t *testing.T) string {
	if s := os.Getenv("PACEGATE_ROCKETMQ_SCRIPT"); s != "" {
		return s
	}
	s, err := filepath.Abs("../../scripts/rocketmq/rmq.sh")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProxyRestart restarts the proxy (rmq.sh restart-proxy) while a
// publisher runs: publishes fail fast with ErrUnavailable and Ready reports
// the outage; afterwards the backend reconnects and every accepted message
// is delivered. Set PACEGATE_ROCKETMQ_NO_RESTART=1 to skip it on a broker
// you do not own.
func TestProxyRestart(t *testing.T) { restartUnderLoad(t, "restart-proxy", true) }

// TestBrokerRestart restarts the broker itself (rmq.sh restart-broker;
// namesrv and proxy stay up) while a publisher runs. Lite subscriptions
// live only in broker memory, so the restarted broker knows none: the
// backend must subscribe its LiteTopics again. Every accepted message is
// delivered (redeliveries are expected and counted), and delivery resumes
// within seconds of the broker's return. The outage need not be seen by
// Publish at all (the proxy may hold a send until the broker is back), so
// only a failed publish's kind and speed are checked.
func TestBrokerRestart(t *testing.T) { restartUnderLoad(t, "restart-broker", false) }

// restartUnderLoad runs rmq.sh sub while publishing to one LiteTopic every
// 50 ms, and checks what both restart tests promise.
func restartUnderLoad(t *testing.T, sub string, mustNotice bool) {
	in := sharedInstance(t)
	if os.Getenv("PACEGATE_ROCKETMQ_NO_RESTART") != "" {
		t.Skip("PACEGATE_ROCKETMQ_NO_RESTART is set")
	}
	script := rmqScript(t)
	if _, err := os.Stat(script); err != nil {
		t.Skipf("no rmq.sh to restart with: %v", err)
	}
	// lt carries the publisher's messages; held has 10 messages, each
	// suspended once, so that they are in flight in the broker when it
	// goes down.
	lt, held := liteTopic(in.b, sub), liteTopic(in.b, sub+"-held")
	waits.exemptTopic(lt) // bounded below: every accepted message arrives, and soon after the restart
	waits.exemptTopic(held)
	var delivered deliveries
	var suspended sync.Map
	var dups atomic.Int64
	handle := func(_ context.Context, d *consume.Delivery) consume.Result {
		if strings.HasPrefix(d.ID, "pre-") {
			if _, again := suspended.LoadOrStore(d.ID, true); !again {
				return consume.Suspend(2 * time.Second)
			}
		}
		if !delivered.record(d.ID, time.Now()) {
			dups.Add(1) // a redelivery: the handler is idempotent on the id
		}
		return consume.Success()
	}
	defer in.r.set(lt, handle)()
	defer in.r.set(held, handle)()
	pubAt := map[string]time.Time{}
	var accepted, refused, pre []string
	for i := range 10 {
		id := fmt.Sprintf("pre-%s-%s-%d", sub, runID, i)
		pre = append(pre, id)
		publish(t, in.b, message(id, held))
		pubAt[id] = time.Now()
		accepted = append(accepted, id)
	}

	restartDone := make(chan error, 1)
	var restartOut []byte
	restartStart := time.Now()
	go func() {
		cmd := exec.CommandContext(t.Context(), "bash", script, sub)
		out, err := cmd.CombinedOutput()
		restartOut = out
		restartDone <- err
	}()

	var (
		afterIDs              []string
		failed, readyErrs     int
		maxFail, maxOK        time.Duration
		firstFail, firstAfter time.Time
		restarted             bool
	)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; !restarted || len(afterIDs) < 20; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery within 3 min: %d accepted after the restart, restart done=%v", len(afterIDs), restarted)
		}
		select {
		case err := <-restartDone:
			if err != nil {
				t.Fatalf("%s: %v\n%s", sub, err, restartOut)
			}
			restarted = true
			t.Logf("%s took %s", sub, time.Since(restartStart).Round(time.Millisecond))
		case <-tick.C:
		}
		if err := in.b.Ready(t.Context()); err != nil {
			if !errors.Is(err, consume.ErrUnavailable) {
				t.Fatalf("Ready = %v, want ErrUnavailable", err)
			}
			readyErrs++
		}
		id := fmt.Sprintf("%s-%s-%d", sub, runID, i)
		start := time.Now()
		err := in.b.Publish(t.Context(), message(id, lt))
		took := time.Since(start)
		switch {
		case err == nil:
			waits.published(id)
			pubAt[id] = time.Now()
			accepted = append(accepted, id)
			maxOK = max(maxOK, took)
			if restarted {
				afterIDs = append(afterIDs, id)
			}
			if !firstFail.IsZero() && firstAfter.IsZero() {
				firstAfter = time.Now()
			}
		case errors.Is(err, consume.ErrUnavailable):
			refused = append(refused, id)
			failed++
			maxFail = max(maxFail, took)
			if firstFail.IsZero() {
				firstFail = time.Now()
			}
		default:
			t.Fatalf("Publish during %s = %v, want nil or ErrUnavailable", sub, err)
		}
	}
	if mustNotice && (failed == 0 || readyErrs == 0) {
		t.Errorf("the outage went unnoticed: %d failed publishes, %d Ready errors", failed, readyErrs)
	}
	if limit := rocketmq.DefaultPublishTimeout + time.Second; maxFail > limit || maxOK > limit {
		t.Errorf("a Publish took %s (refused) / %s (accepted); want ≤ %s, never a hang", maxFail, maxOK, limit)
	}
	// Delivery resumes within seconds once the broker is back: each message
	// accepted after the restart arrives within 5 s of its publish.
	var resumed time.Duration
	for _, id := range afterIDs {
		for {
			if at, ok := delivered.at(id); ok {
				resumed = max(resumed, at.Sub(pubAt[id]))
				break
			}
			if time.Since(pubAt[id]) > 30*time.Second {
				t.Fatalf("%s, published after the %s, not delivered 30 s after it", id, sub)
			}
			<-tick.C
		}
	}
	if resumed > slowDelivery {
		t.Errorf("a message accepted after the %s was delivered %s after its publish, want ≤ %s", sub, resumed, slowDelivery)
	}
	restartEnd := pubAt[afterIDs[0]]
	// Every accepted message arrives (one in flight during the outage is
	// redelivered after its invisibility, 15 s here).
	waitStart := time.Now()
	for missing := delivered.missing(accepted); len(missing) > 0; missing = delivered.missing(accepted) {
		if time.Since(waitStart) > 60*time.Second {
			t.Fatalf("%d of %d accepted messages never delivered: %v", len(missing), len(accepted), missing)
		}
		<-tick.C
	}
	// A refused publish may have reached the broker all the same (the
	// proxy held it until the broker was back, or the client's send went
	// on after its deadline), and its message is delivered too: such
	// deliveries are expected, and are no substitute for an accepted one.
	// Nothing else may arrive.
	late := delivered.outside(accepted)
	if stray := slices.DeleteFunc(slices.Clone(late), func(id string) bool { return slices.Contains(refused, id) }); len(stray) > 0 {
		t.Errorf("delivered %v, which were neither accepted nor refused", stray)
	}
	heldFirst, heldLast, heldBefore := time.Duration(1<<62), time.Duration(0), 0
	for _, id := range pre {
		at, ok := delivered.at(id)
		if !ok {
			t.Fatalf("%s, accepted before the %s, has no delivery recorded", id, sub)
		}
		d := at.Sub(restartEnd)
		if d < 0 {
			heldBefore++
			continue
		}
		heldFirst, heldLast = min(heldFirst, d), max(heldLast, d)
	}
	// The held LiteTopic is FIFO and each of its messages is suspended 2 s
	// once, so the last one comes about 2 s × the rest after the first.
	if heldBefore == len(pre) {
		heldFirst = 0
	}
	t.Logf("%s: of the 10 messages in flight at the restart, %d were delivered before the first publish accepted after it; the next %s after it, the last %s after it",
		sub, heldBefore, heldFirst.Round(time.Millisecond), heldLast.Round(time.Millisecond))
	t.Logf("%s: %d publishes accepted (slowest %s), %d refused with ErrUnavailable (slowest %s, %d of them delivered all the same), %d Ready errors; unavailable for %s as seen by Publish; the %d published after it delivered within %s of their publish; all %d accepted delivered (last %s after the publisher stopped), %d redeliveries; watchdog %+v",
		sub, len(accepted), maxOK.Round(time.Millisecond), failed, maxFail.Round(time.Millisecond), len(late), readyErrs,
		firstAfter.Sub(firstFail).Round(time.Millisecond), len(afterIDs), resumed.Round(time.Millisecond),
		len(accepted), time.Since(waitStart).Round(time.Millisecond), dups.Load(), in.b.WatchdogStats())
}

// deliveries records the first delivery of each message id. It is safe
// for concurrent use: the handler records, the test reads.
type deliveries struct {
	mu    sync.Mutex
	first map[string]time.Time // guarded by mu
}

// record notes a delivery of id at now, and reports whether it is the
// first.
func (d *deliveries) record(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.first[id]; dup {
		return false
	}
	if d.first == nil {
		d.first = make(map[string]time.Time)
	}
	d.first[id] = now
	return true
}

// at is the first delivery of id.
func (d *deliveries) at(id string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.first[id]
	return at, ok
}

// missing lists the ids with no delivery.
func (d *deliveries) missing(ids []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, id := range ids {
		if _, ok := d.first[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// outside lists the delivered ids that are not in ids, sorted.
func (d *deliveries) outside(ids []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id := range d.first {
		if !slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
