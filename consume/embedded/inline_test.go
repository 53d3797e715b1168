package embedded

import (
	"context"
	"sync"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

// With InlineDelivery, a message for an idle LiteTopic is handled on the
// publisher's goroutine before Publish returns; one for a busy LiteTopic
// still goes through the pool, in order.
func TestInlineDelivery(t *testing.T) {
	e := New(Config{Workers: 2, Logger: quiet, InlineDelivery: true})
	release, entered, last := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var order []string
	inline := map[string]bool{}
	publishing := ""
	if err := e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
		mu.Lock()
		order = append(order, d.ID)
		inline[d.ID] = d.ID == publishing
		mu.Unlock()
		if d.ID == "a2" {
			close(last)
		}
		if d.ID == "a1" {
			close(entered)
			<-release // keep topic a in flight
		}
		return consume.Success()
	}); err != nil {
		t.Fatal(err)
	}
	pub := func(topic, id string) {
		mu.Lock()
		publishing = id
		mu.Unlock()
		mustPublish(t, e, msg(topic, id))
		mu.Lock()
		publishing = ""
		mu.Unlock()
	}
	pub("b", "b1") // idle topic, free workers: handled inline
	done := make(chan struct{})
	go func() { defer close(done); pub("a", "a1") }() // inline, and blocks in the handler
	<-entered
	pub("a", "a2") // topic a is in flight: queued, not inline
	close(release)
	<-done
	<-last
	if left := mustClose(t, e); len(left.IDs) != 0 {
		t.Fatalf("leftover %v", left.IDs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 3 || order[2] != "a2" || !inline["b1"] || !inline["a1"] || inline["a2"] {
		t.Fatalf("order %v inline %v", order, inline)
	}
}
