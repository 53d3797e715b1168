package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func msg(topic, id string) *consume.Message {
	return &consume.Message{ID: id, LiteTopic: topic, Body: []byte(id)}
}

func mustPublish(t *testing.T, e *Engine, m *consume.Message) {
	t.Helper()
	if err := e.Publish(context.Background(), m); err != nil {
		t.Fatalf("Publish(%s): %v", m.ID, err)
	}
}

func mustClose(t *testing.T, e *Engine) consume.Leftover {
	t.Helper()
	l, err := e.Close(context.Background())
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	return l
}

// Many producers and the whole pool at once: every message is handled to
// Success exactly once, in publish order per LiteTopic, and never two of
// one LiteTopic at a time. Suspend and Retry results are mixed in.
func TestExactlyOnceFIFO(t *testing.T) {
	const producers, topicsPer, perTopic = 8, 8, 60
	e := New(Config{Workers: 16, Logger: quiet, RetryBackoff: func(int) time.Duration { return time.Microsecond }})
	var (
		mu       sync.Mutex
		next     = map[string]int{} // topic → next expected seq
		acked    = map[string]int{} // id → successes
		inflight sync.Map           // topic → *atomic.Int32
		bad      atomic.Value
		total    atomic.Int64
		done     = make(chan struct{})
	)
	h := func(_ context.Context, d *consume.Delivery) consume.Result {
		c, _ := inflight.LoadOrStore(d.LiteTopic, new(atomic.Int32))
		if c.(*atomic.Int32).Add(1) != 1 {
			bad.Store("two in flight on " + d.LiteTopic)
		}
		defer c.(*atomic.Int32).Add(-1)
		seq, _ := strconv.Atoi(d.Properties["seq"])
		switch {
		case seq%7 == 3 && d.Attempt == 1:
			return consume.Retry()
		case seq%5 == 1 && d.Properties["suspended"] == "" && d.Attempt == 1:
			d.Properties["suspended"] = "1" // only touched by the one handler in flight
			return consume.Suspend(time.Duration(seq%3) * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if next[d.LiteTopic] != seq {
			bad.Store(fmt.Sprintf("%s: got seq %d, want %d", d.LiteTopic, seq, next[d.LiteTopic]))
		}
		next[d.LiteTopic] = seq + 1
		acked[d.ID]++
		if total.Add(1) == producers*topicsPer*perTopic {
			close(done)
		}
		return consume.Success()
	}
	if err := e.Start(h); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perTopic {
				for j := range topicsPer {
					topic := fmt.Sprintf("p%d-t%d", p, j)
					m := msg(topic, fmt.Sprintf("%s-%d", topic, i))
					m.Properties = map[string]string{"seq": strconv.Itoa(i)}
					mustPublish(t, e, m)
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("only %d of %d acked", total.Load(), producers*topicsPer*perTopic)
	}
	if l := mustClose(t, e); len(l.IDs) != 0 {
		t.Errorf("leftovers %v", l.IDs)
	}
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	for id, n := range acked {
		if n != 1 {
			t.Errorf("%s acked %d times", id, n)
		}
	}
}

// A suspended topic is delivered again exactly at its due time, without
// an attempt being counted; a Retry counts one.
func TestSuspendResumesOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Workers: 2, Logger: quiet, RetryBackoff: func(int) time.Duration { return 30 * time.Millisecond }})
		type seen struct {
			at      time.Time
			attempt int
		}
		var got []seen
		results := []consume.Result{consume.Suspend(50 * time.Millisecond), consume.Retry(), consume.Success()}
		e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
			got = append(got, seen{time.Now(), d.Attempt})
			return results[len(got)-1]
		})
		start := time.Now()
		mustPublish(t, e, msg("a", "1"))
		time.Sleep(time.Second)
		mustClose(t, e)
		want := []seen{{start, 1}, {start.Add(50 * time.Millisecond), 1}, {start.Add(80 * time.Millisecond), 2}}
		if !slices.Equal(got, want) {
			t.Fatalf("deliveries %v, want %v", got, want)
		}
	})
}

// A suspended topic does not hold up the others, and an earlier due time
// arriving later re-arms the timer.
func TestSuspendOrdering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Workers: 1, Logger: quiet})
		delays := map[string]time.Duration{"slow": 300 * time.Millisecond, "fast": 10 * time.Millisecond}
		var order []string
		start := time.Now()
		e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
			if dl, ok := delays[d.LiteTopic]; ok {
				delete(delays, d.LiteTopic)
				return consume.Suspend(dl)
			}
			order = append(order, fmt.Sprintf("%s@%s", d.LiteTopic, time.Since(start)))
			return consume.Success()
		})
		mustPublish(t, e, msg("slow", "s"))
		mustPublish(t, e, msg("fast", "f"))
		mustPublish(t, e, msg("plain", "p"))
		time.Sleep(time.Second)
		mustClose(t, e)
		want := []string{"plain@0s", "fast@10ms", "slow@300ms"}
		if !slices.Equal(order, want) {
			t.Fatalf("order %v, want %v", order, want)
		}
	})
}

// One hot topic cannot starve others: with one worker, topics that become
// ready are served before the hot topic's next message.
func TestRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Workers: 1, Logger: quiet})
		for i := range 50 {
			mustPublish(t, e, msg("hot", fmt.Sprint("h", i)))
		}
		for i := range 4 {
			mustPublish(t, e, msg(fmt.Sprint("cold", i), fmt.Sprint("c", i)))
		}
		var order []string
		e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
			order = append(order, d.ID)
			return consume.Success()
		})
		synctest.Wait()
		mustClose(t, e)
		if want := []string{"h0", "c0", "c1", "c2", "c3", "h1"}; !slices.Equal(order[:6], want) {
			t.Fatalf("first deliveries %v, want %v", order[:6], want)
		}
	})
}

func TestEngineFull(t *testing.T) {
	e := New(Config{MaxMessages: 5, MaxBytes: 1 << 10, Logger: quiet})
	for i := range 4 {
		mustPublish(t, e, msg("a", fmt.Sprint("a", i))) // no per-topic limit: that is consume.Queue's
	}
	mustPublish(t, e, msg("b", "b0"))
	var fe *consume.FullError
	err := e.Publish(context.Background(), msg("c", "c0"))
	if !errors.As(err, &fe) || fe.Scope != consume.ScopeEngine || fe.Limit != 5 || fe.RetryAfter != time.Second {
		t.Fatalf("engine message limit: %v (%+v)", err, fe)
	}
	if !errors.Is(err, consume.ErrFull) {
		t.Fatal("not ErrFull")
	}
	e2 := New(Config{MaxBytes: 10, Logger: quiet})
	mustPublish(t, e2, &consume.Message{ID: "x", LiteTopic: "x", Body: make([]byte, 10)})
	if err := e2.Publish(context.Background(), msg("y", "y")); !errors.As(err, &fe) || fe.Scope != consume.ScopeEngine || fe.Limit != 10 {
		t.Fatalf("engine byte limit: %v", err)
	}
	mustClose(t, e2)
	// Nothing was lost: all five are delivered.
	got := make(chan string, 10)
	e.Start(func(_ context.Context, d *consume.Delivery) consume.Result { got <- d.ID; return consume.Success() })
	var ids []string
	for range 5 {
		ids = append(ids, <-got)
	}
	slices.Sort(ids)
	if want := []string{"a0", "a1", "a2", "a3", "b0"}; !slices.Equal(ids, want) {
		t.Fatalf("delivered %v, want %v", ids, want)
	}
	mustClose(t, e)
}

// RetryAfter of a full engine reflects its measured drain rate.
func TestRetryAfterEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{MaxMessages: 5, Logger: quiet})
		e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
			time.Sleep(200 * time.Millisecond) // a handler that drains 5/s
			return consume.Success()
		})
		full := func() *consume.FullError {
			for i := 0; ; i++ {
				err := e.Publish(context.Background(), msg("a", fmt.Sprint(i)))
				var fe *consume.FullError
				if errors.As(err, &fe) {
					return fe
				}
			}
		}
		full()
		time.Sleep(time.Second) // five departures measured
		if got := full().RetryAfter; got != 200*time.Millisecond {
			t.Errorf("RetryAfter while draining = %v, want 200ms", got)
		}
		e.Close(context.Background())
	})
}

func TestIdleTTLReclaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{IdleTTL: time.Minute, Logger: quiet})
		e.Start(func(context.Context, *consume.Delivery) consume.Result { return consume.Success() })
		mustPublish(t, e, msg("old", "1"))
		mustPublish(t, e, msg("old2", "2"))
		synctest.Wait()
		time.Sleep(30 * time.Second)
		mustPublish(t, e, msg("old2", "3")) // used again: not expired
		synctest.Wait()
		if s := e.Stats(); s.Topics != 2 || s.Messages != 0 {
			t.Fatalf("before TTL: %+v", s)
		}
		time.Sleep(31 * time.Second)
		mustPublish(t, e, msg("new", "4")) // lazily reclaims "old" only
		synctest.Wait()
		if s := e.Stats(); s.Topics != 2 || s.Messages != 0 {
			t.Fatalf("after TTL: %+v", s)
		}
		e.mu.Lock()
		_, oldThere := e.topics["old"]
		e.mu.Unlock()
		if oldThere {
			t.Fatal(`"old" not reclaimed`)
		}
		mustClose(t, e)
	})
}

// A panicking handler kills only its own message; the single worker lives
// on and serves the rest.
func TestPanicKillsOnlyItsMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reported []string
		e := New(Config{Workers: 1, Logger: quiet, OnPanic: func(d *consume.Delivery, v any) {
			reported = append(reported, fmt.Sprintf("%s:%v", d.ID, v))
		}})
		var ok []string
		e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
			if d.ID == "bad" {
				panic("boom")
			}
			ok = append(ok, d.ID)
			return consume.Success()
		})
		for _, id := range []string{"a", "bad", "b"} {
			mustPublish(t, e, msg("t", id))
		}
		mustPublish(t, e, msg("u", "c"))
		synctest.Wait()
		if l := mustClose(t, e); len(l.IDs) != 0 {
			t.Errorf("leftovers %v", l.IDs)
		}
		if !slices.Equal(reported, []string{"bad:boom"}) || len(ok) != 3 {
			t.Fatalf("reported %v, ok %v", reported, ok)
		}
	})
}

// Close with a stuck handler reports what it leaves; once the handler
// returns, a second Close stops cleanly and no engine goroutine is left
// (the bubble also fails the test if any goroutine outlives it).
func TestCloseReportsLeftoversAndLeaksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{Workers: 8, Logger: quiet})
		release := make(chan struct{})
		entered := make(chan struct{})
		e.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
			if d.ID == "block" {
				close(entered)
				<-release
			}
			return consume.Suspend(time.Hour)
		})
		mustPublish(t, e, msg("a", "block"))
		mustPublish(t, e, msg("a", "a2"))
		mustPublish(t, e, msg("b", "b1"))
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		l, err := e.Close(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with a stuck handler: %v", err)
		}
		slices.Sort(l.IDs)
		if want := []string{"a2", "b1", "block"}; !slices.Equal(l.IDs, want) {
			t.Fatalf("leftovers %v, want %v", l.IDs, want)
		}
		if err := e.Publish(context.Background(), msg("c", "c")); !errors.Is(err, consume.ErrClosed) {
			t.Fatalf("Publish after Close: %v", err)
		}
		if e.Ready(context.Background()) == nil || e.Start(nil) == nil {
			t.Fatal("Ready/Start after Close succeeded")
		}
		if len(engineGoroutines(t)) == 0 {
			t.Fatal("no engine goroutine seen while a handler is stuck: the leak check below would see nothing")
		}
		close(release)
		mustClose(t, e) // now the handler has returned: a clean stop
		synctest.Wait() // goroutines that are returning finish
		if left := engineGoroutines(t); len(left) > 0 {
			t.Fatalf("%d engine goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})
}

// engineGoroutines returns the stacks of the goroutines running engine
// code (a non-test file of this package).
func engineGoroutines(t *testing.T) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		for _, m := range engineFile.FindAllStringSubmatch(g, -1) {
			if !strings.HasSuffix(m[1], "_test") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

var engineFile = regexp.MustCompile(`/consume/embedded/([a-z_]+)\.go:`)

func TestCloseBeforeStart(t *testing.T) {
	e := New(Config{})
	mustPublish(t, e, msg("a", "1"))
	if l := mustClose(t, e); !slices.Equal(l.IDs, []string{"1"}) {
		t.Fatalf("leftovers %v", l.IDs)
	}
}
