package embedded

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// Suspend versus Sleep: 50 LiteTopics share 50 workers, each topic gets a
// message every 100 ms for 3 s, and the first k topics are throttled for
// 300 ms per message.
const (
	pocTopics   = 50
	pocWorkers  = 50
	pocInterval = 100 * time.Millisecond
	pocRun      = 3 * time.Second
	pocThrottle = 300 * time.Millisecond
)

// pocResult is what the healthy (unthrottled) topics saw.
type pocResult struct {
	healthyMax, healthyMean time.Duration
	healthyLeft             int // healthy messages never delivered
}

func (r pocResult) String() string {
	return fmt.Sprintf("healthy max %v mean %v undelivered %d", r.healthyMax, r.healthyMean, r.healthyLeft)
}

// latencies records publish→dispatch latency of healthy messages. Safe for
// concurrent use.
type latencies struct {
	mu        sync.Mutex
	published map[string]time.Time
	sum, max  time.Duration
	n         int
}

func (l *latencies) publish(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.published[id] = time.Now()
}

func (l *latencies) dispatch(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at, ok := l.published[id]; ok && !strings.HasPrefix(id, "throttled") {
		d := time.Since(at)
		l.sum += d
		l.max = max(l.max, d)
		l.n++
	}
	delete(l.published, id)
}

func (l *latencies) result(healthyTotal int) pocResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := pocResult{healthyMax: l.max, healthyLeft: healthyTotal - l.n}
	if l.n > 0 {
		r.healthyMean = l.sum / time.Duration(l.n)
	}
	return r
}

func pocID(topic, i, throttled int) string {
	if topic < throttled {
		return fmt.Sprintf("throttled-%d-%d", topic, i)
	}
	return fmt.Sprintf("healthy-%d-%d", topic, i)
}

// produce publishes every topic's messages on the POC's schedule.
func produce(throttled int, l *latencies, send func(topic int, id string)) {
	var wg sync.WaitGroup
	for topic := range pocTopics {
		wg.Go(func() {
			for i := range int(pocRun / pocInterval) {
				id := pocID(topic, i, throttled)
				l.publish(id)
				send(topic, id)
				time.Sleep(pocInterval)
			}
		})
	}
	wg.Wait()
}

// runSuspend is the LiteTopic way: a throttled message is answered with
// Suspend(300ms) and the worker returns at once.
func runSuspend(t *testing.T, throttled int) pocResult {
	l := &latencies{published: map[string]time.Time{}}
	e := New(Config{Workers: pocWorkers, Logger: quiet})
	waited := map[string]bool{} // only touched by the one handler in flight per topic
	var mu sync.Mutex
	e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
		if strings.HasPrefix(d.ID, "throttled") {
			mu.Lock()
			first := !waited[d.ID]
			waited[d.ID] = true
			mu.Unlock()
			if first {
				return consume.Suspend(pocThrottle)
			}
		}
		l.dispatch(d.ID)
		return consume.Success()
	})
	produce(throttled, l, func(topic int, id string) {
		mustPublish(t, e, msg(fmt.Sprint("t", topic), id))
	})
	left := mustClose(t, e)
	for _, id := range left.IDs {
		if !strings.HasPrefix(id, "throttled") {
			t.Errorf("healthy message %s left queued", id)
		}
	}
	return l.result((pocTopics - throttled) * int(pocRun/pocInterval))
}

// runSleep is the contrast: a classic consumer where the pool takes
// messages of all tenants from one queue and a throttled message sleeps
// 300 ms holding its worker. (On the engine itself per-LiteTopic FIFO
// would cap a sleeping tenant at one worker, so there the collapse only
// starts once throttled topics outnumber the workers.)
func runSleep(throttled int) pocResult {
	l := &latencies{published: map[string]time.Time{}}
	queue := make(chan string, pocTopics*int(pocRun/pocInterval))
	var wg sync.WaitGroup
	for range pocWorkers {
		wg.Go(func() {
			for id := range queue {
				if strings.HasPrefix(id, "throttled") {
					time.Sleep(pocThrottle)
				}
				l.dispatch(id)
			}
		})
	}
	produce(throttled, l, func(_ int, id string) { queue <- id })
	close(queue)
	wg.Wait()
	return l.result((pocTopics - throttled) * int(pocRun/pocInterval))
}

func TestPOCSuspendVersusSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := runSuspend(t, 0)
		t.Logf("nothing throttled: %v", base)
		for _, k := range []int{5, 40} {
			s := runSuspend(t, k)
			t.Logf("suspend, %d throttled: %v", k, s)
			if s.healthyMax > base.healthyMax+time.Millisecond || s.healthyLeft != 0 {
				t.Errorf("suspend, %d throttled: healthy topics degraded: %v (baseline %v)", k, s, base)
			}
		}
		if s := runSleep(5); s.healthyMax > base.healthyMax+time.Millisecond {
			t.Errorf("sleep, 5 throttled: healthy topics should still be fine: %v", s)
		} else {
			t.Logf("sleep, 5 throttled: %v", s)
		}
		s := runSleep(40)
		t.Logf("sleep, 40 throttled: %v", s)
		if s.healthyMax < time.Second || s.healthyMean < 500*time.Millisecond {
			t.Errorf("sleep, 40 throttled: expected the healthy topics to collapse, got %v", s)
		}
	})
}
