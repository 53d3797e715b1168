package embedded

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// A suspended topic woken early is delivered again at once, and the other
// suspended topics keep their due times (the heap stays ordered).
func TestWakeEndsSuspensionEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Workers: 2, Logger: quiet})
		start := time.Now()
		type got struct {
			topic string
			at    time.Duration
		}
		deliveries := make(chan got, 16)
		var mu sync.Mutex
		seen := map[string]int{}
		h := func(_ context.Context, d *consume.Delivery) consume.Result {
			deliveries <- got{d.LiteTopic, time.Since(start)}
			mu.Lock()
			seen[d.LiteTopic]++
			first := seen[d.LiteTopic] == 1
			mu.Unlock()
			if first { // suspend, each topic for a different time
				return consume.Suspend(map[string]time.Duration{"a": time.Hour, "b": 2 * time.Second, "c": 3 * time.Second}[d.LiteTopic])
			}
			return consume.Success()
		}
		for _, name := range []string{"a", "b", "c"} {
			mustPublish(t, e, msg(name, name+"1"))
		}
		if err := e.Start(h); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			<-deliveries
		}
		synctest.Wait()
		time.Sleep(time.Second) // fake time: one second into the suspensions
		if !e.Wake("a") {
			t.Fatal("Wake(a) = false for a suspended topic")
		}
		if e.Wake("nope") {
			t.Fatal("Wake of an unknown topic reported true")
		}
		want := []got{{"a", time.Second}, {"b", 2 * time.Second}, {"c", 3 * time.Second}}
		for _, w := range want {
			if g := <-deliveries; g != w {
				t.Fatalf("delivery %+v, want %+v", g, w)
			}
		}
		if left := mustClose(t, e); len(left.IDs) != 0 {
			t.Fatalf("leftover %v", left.IDs)
		}
	})
}

// A wake that arrives while the topic's message is being handled is not
// lost: the Suspend the handler returns ends at once.
func TestWakeWhileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Workers: 1, Logger: quiet})
		start := time.Now()
		handling, decided := make(chan struct{}), make(chan struct{})
		deliveries := make(chan time.Duration, 4)
		calls := 0
		h := func(_ context.Context, d *consume.Delivery) consume.Result {
			calls++
			deliveries <- time.Since(start)
			if calls == 1 {
				close(handling)
				<-decided // the wake lands here, between decision and suspension
				return consume.Suspend(time.Hour)
			}
			return consume.Success()
		}
		mustPublish(t, e, msg("a", "a1"))
		if err := e.Start(h); err != nil {
			t.Fatal(err)
		}
		<-deliveries
		<-handling
		if !e.Wake("a") {
			t.Fatal("Wake of a topic in flight = false")
		}
		close(decided)
		if at := <-deliveries; at != 0 {
			t.Fatalf("redelivered after %v, want at once", at)
		}
		mustClose(t, e)
	})
}
