package rocketmq_test

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// slowDelivery bounds every delivery wait of the run: one slower fails the
// run (TestMain). Before the backend's watchdog the broker's ~30 s stalls
// (a LiteTopic subscription lost to the client's full sync, a lost
// dispatch event) happened in about one run in three; the watchdog
// re-subscribes a LiteTopic overdue by StallAfter (2 s), so a wait over
// 5 s is a bug.
const slowDelivery = 5 * time.Second

// waits times every delivery of the run's messages from the moment it
// could have been delivered: its publish returned, the previous message
// of its LiteTopic was answered, and the LiteTopic's last suspension
// (raised to the client's 50 ms minimum) ran out. That is the broker's
// own latency: queueing behind a paced head or a deliberate Suspend is
// not counted. A delivery after a Retry is not timed (the backend picks
// its backoff).
var waits = &waitLog{pub: map[string]time.Time{}, free: map[string]time.Time{}, retried: map[string]bool{}, acked: map[string]bool{}, exempt: map[string]bool{}}

type waitLog struct {
	mu      sync.Mutex
	pub     map[string]time.Time // request id → publish returned
	free    map[string]time.Time // LiteTopic → when it may deliver again
	retried map[string]bool      // LiteTopic → a Retry is pending: not timed
	acked   map[string]bool      // request id → answered Success once
	exempt  map[string]bool      // LiteTopic → not timed: a test that breaks the broker on purpose bounds it itself
	redeliv int                  // deliveries of a message already answered Success (a lost ack)
	all     []time.Duration
	slow    []string
}

// published records that m is in the broker.
func (w *waitLog) published(id string) {
	w.mu.Lock()
	w.pub[id] = time.Now()
	w.mu.Unlock()
}

// delivered times d; call before its handler.
func (w *waitLog) delivered(d *consume.Delivery) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.acked[d.ID] {
		w.redeliv++
		return
	}
	pub, ok := w.pub[d.ID]
	if !ok || w.retried[d.LiteTopic] || w.exempt[d.LiteTopic] {
		return
	}
	ready := pub
	if f := w.free[d.LiteTopic]; f.After(ready) {
		ready = f
	}
	wait := max(now.Sub(ready), 0)
	w.all = append(w.all, wait)
	if wait > slowDelivery {
		w.slow = append(w.slow, fmt.Sprintf("%s on %s: %s (published %s ago)", d.ID, d.LiteTopic,
			wait.Round(time.Millisecond), now.Sub(pub).Round(time.Millisecond)))
	}
}

// answered records the handler's result for d.
func (w *waitLog) answered(d *consume.Delivery, r consume.Result) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.Action {
	case consume.ActionSuccess:
		w.free[d.LiteTopic] = now
		w.acked[d.ID] = true
		delete(w.retried, d.LiteTopic)
	case consume.ActionSuspend:
		w.free[d.LiteTopic] = now.Add(max(r.Delay, 50*time.Millisecond))
	default:
		w.retried[d.LiteTopic] = true
	}
}

// exemptTopic leaves lt's deliveries out of the run's bound: a test that
// restarts the proxy or drops a subscription on purpose bounds them itself.
func (w *waitLog) exemptTopic(lt string) {
	w.mu.Lock()
	w.exempt[lt] = true
	w.mu.Unlock()
}

// report writes the run's summary and returns how many deliveries were
// slower than slowDelivery: any is a failure of the run (TestMain).
func (w *waitLog) report(out io.Writer) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.all) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), w.all...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))].Round(100 * time.Microsecond) }
	fmt.Fprintf(out, "broker delivery wait (deliverable → delivered) over %d deliveries: p50 %s p90 %s p99 %s max %s; %d over %s; %d redeliveries of acknowledged messages\n",
		len(s), q(.5), q(.9), q(.99), q(1), len(w.slow), slowDelivery, w.redeliv)
	for _, l := range w.slow {
		fmt.Fprintln(out, "  slow delivery:", l)
	}
	return len(w.slow)
}
