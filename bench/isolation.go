package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
)

// Isolation: 50 LiteTopics share 50 workers; every topic gets a message
// every 100 ms; the first k topics are throttled for 300 ms per message.
// A throttled topic must cost the healthy ones nothing.
const (
	isoTopics   = 50
	isoWorkers  = 50
	isoInterval = 100 * time.Millisecond
	isoThrottle = 300 * time.Millisecond
)

// waitLog records publish→dispatch queue waits of healthy messages.
type waitLog struct {
	mu        sync.Mutex
	published map[string]time.Time
	waits     []float64 // ms
}

func newWaitLog() *waitLog { return &waitLog{published: map[string]time.Time{}} }

func (l *waitLog) publish(id string) {
	l.mu.Lock()
	l.published[id] = time.Now()
	l.mu.Unlock()
}

func (l *waitLog) dispatch(id string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if at, ok := l.published[id]; ok && strings.HasPrefix(id, "healthy") {
		l.waits = append(l.waits, ms(now.Sub(at)))
	}
	delete(l.published, id)
}

func (l *waitLog) healthy() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]float64(nil), l.waits...)
}

func isoID(topic, i, throttled int) string {
	if topic < throttled {
		return fmt.Sprintf("throttled-%d-%d", topic, i)
	}
	return fmt.Sprintf("healthy-%d-%d", topic, i)
}

// isoProduce publishes every topic's messages on the POC's schedule
// for dur, staggering the topics across one interval.
func isoProduce(ctx context.Context, dur time.Duration, throttled int, l *waitLog, send func(topic int, id string)) {
	var wg sync.WaitGroup
	for topic := range isoTopics {
		wg.Go(func() {
			sleepCtx(ctx, time.Duration(topic)*isoInterval/isoTopics)
			tick := time.NewTicker(isoInterval)
			defer tick.Stop()
			for i := range int(dur / isoInterval) {
				if ctx.Err() != nil {
					return
				}
				id := isoID(topic, i, throttled)
				l.publish(id)
				send(topic, id)
				<-tick.C
			}
		})
	}
	wg.Wait()
}

// isoSuspend is pacegate's way: a throttled message is answered with
// Suspend(300ms) once and the worker returns at once.
func isoSuspend(ctx context.Context, dur time.Duration, throttled int) ([]float64, int, error) {
	l := newWaitLog()
	e := embedded.New(embedded.Config{Workers: isoWorkers, Logger: quietLogger})
	var mu sync.Mutex
	waited := map[string]bool{}
	err := e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
		if strings.HasPrefix(d.ID, "throttled") {
			mu.Lock()
			first := !waited[d.ID]
			waited[d.ID] = true
			mu.Unlock()
			if first {
				return consume.Suspend(isoThrottle)
			}
		}
		l.dispatch(d.ID)
		return consume.Success()
	})
	if err != nil {
		return nil, 0, err
	}
	var pubErr error
	isoProduce(ctx, dur, throttled, l, func(topic int, id string) {
		if err := e.Publish(ctx, message(fmt.Sprint("t", topic), id, nil)); err != nil {
			pubErr = err
		}
	})
	healthyTotal := (isoTopics - throttled) * int(dur/isoInterval)
	waitFor(ctx, 2*time.Second, func() bool { return len(l.healthy()) >= healthyTotal })
	closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = e.Close(closeCtx)
	return l.healthy(), healthyTotal, pubErr
}

// isoSleep is the contrast: a classic consumer whose pool takes every
// tenant's messages from one shared queue, a throttled message sleeping
// 300 ms on its worker (a Thread.sleep-style consumer).
func isoSleep(ctx context.Context, dur time.Duration, throttled int) ([]float64, int) {
	l := newWaitLog()
	queue := make(chan string, isoTopics*int(dur/isoInterval))
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range isoWorkers {
		wg.Go(func() {
			for id := range queue {
				if stop.Err() != nil {
					return
				}
				if strings.HasPrefix(id, "throttled") {
					sleepCtx(stop, isoThrottle)
				}
				l.dispatch(id)
			}
		})
	}
	isoProduce(ctx, dur, throttled, l, func(_ int, id string) { queue <- id })
	close(queue)
	healthyTotal := (isoTopics - throttled) * int(dur/isoInterval)
	waitFor(ctx, 2*time.Second, func() bool { return len(l.healthy()) >= healthyTotal })
	cancel()
	wg.Wait()
	return l.healthy(), healthyTotal
}

// waitFor polls cond every 5 ms for up to d.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
