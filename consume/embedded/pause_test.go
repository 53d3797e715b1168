package embedded

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// pauseRun publishes three messages to one topic, answers the first with
// SuccessThenPause(50ms) and the rest with Success, calls during after
// the first answer (from another goroutine, while the pause runs), and
// returns when each message was delivered, from the start.
func pauseRun(t *testing.T, during func(e *Engine)) []time.Duration {
	e := New(Config{Workers: 2, Logger: quiet})
	var at []time.Duration
	start := time.Now()
	answered := make(chan struct{})
	for _, id := range []string{"1", "2", "3"} { // all queued when the first is answered
		mustPublish(t, e, msg("a", id))
	}
	e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
		at = append(at, time.Since(start))
		if d.ID == "1" {
			defer close(answered)
			return consume.SuccessThenPause(50 * time.Millisecond)
		}
		return consume.Success()
	})
	<-answered
	synctest.Wait()
	if during != nil {
		during(e)
	}
	time.Sleep(time.Second)
	mustClose(t, e)
	return at
}

// A Success with a pause keeps the topic's next message for the pause,
// and only the next one: the one after it comes at once.
func TestSuccessThenPauseKeepsTheNextMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := pauseRun(t, nil)
		if want := []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond}; !slices.Equal(got, want) {
			t.Fatalf("deliveries at %v, want %v", got, want)
		}
	})
}

// A pause is a suspension: Wake ends it.
func TestWakeEndsAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := pauseRun(t, func(e *Engine) {
			time.Sleep(20 * time.Millisecond)
			if !e.Wake("a") {
				t.Error("Wake of a paused topic = false")
			}
		})
		if want := []time.Duration{0, 20 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(got, want) {
			t.Fatalf("deliveries at %v, want %v", got, want)
		}
	})
}

// A topic woken while its handler runs is not paused by the answer: the
// wake (a rate increase, a freed slot) came after the handler decided.
func TestWokenInFlightIsNotPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Workers: 1, Logger: quiet})
		var at []time.Duration
		start := time.Now()
		mustPublish(t, e, msg("a", "1"))
		mustPublish(t, e, msg("a", "2"))
		e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
			at = append(at, time.Since(start))
			if d.ID == "1" {
				e.Wake("a")
				return consume.SuccessThenPause(50 * time.Millisecond)
			}
			return consume.Success()
		})
		time.Sleep(time.Second)
		mustClose(t, e)
		if want := []time.Duration{0, 0}; !slices.Equal(at, want) {
			t.Fatalf("deliveries at %v, want %v", at, want)
		}
	})
}
