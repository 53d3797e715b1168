package rocketmq

import (
	"errors"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/pacegate/pacegate/consume"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// The client's ticks are at base + k·30 s; a subscribe overlaps one when
// the tick falls within its call, widened by syncMargin on both sides.
func TestSyncTickWithin(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name     string
		from, to time.Duration
		want     time.Duration // the tick, from base
		ok       bool
	}{
		{"right after Start: its own sync may still be applied", 100 * time.Millisecond, 300 * time.Millisecond, 0, true},
		{"a second after Start: the next tick is 30 s away", 1 * s, 1*s + 200*time.Millisecond, 30 * s, false},
		{"call spans the first tick", 29*s + 900*time.Millisecond, 30*s + 100*time.Millisecond, 30 * s, true},
		{"call ends just before the tick, within the margin", 29*s + 500*time.Millisecond, 29*s + 800*time.Millisecond, 30 * s, true},
		{"call ends well before the tick", 29 * s, 29*s + 400*time.Millisecond, 30 * s, false},
		{"call starts just after the tick, within the margin", 30*s + 400*time.Millisecond, 30*s + 600*time.Millisecond, 30 * s, true},
		{"call starts well after the tick", 30*s + 600*time.Millisecond, 31 * s, 60 * s, false},
		{"a later tick", 89*s + 950*time.Millisecond, 90*s + 50*time.Millisecond, 90 * s, true},
		{"a slow call spanning the third tick", 85 * s, 91 * s, 90 * s, true},
	} {
		tick, ok := syncTickWithin(t0, at(tc.from), at(tc.to))
		if ok != tc.ok || (tc.ok && !tick.Equal(at(tc.want))) {
			t.Errorf("%s: syncTickWithin(base, +%s, +%s) = +%s, %v; want +%s, %v",
				tc.name, tc.from, tc.to, tick.Sub(t0), ok, tc.want, tc.ok)
		}
	}
	if _, ok := syncTickWithin(time.Time{}, t0, t0.Add(time.Hour)); ok {
		t.Error("no base (clients not started): want no overlap")
	}
}

// A LiteTopic is stalled when its oldest message is overdue by more than
// StallAfter with nothing being handled and no RPC running; each kick
// doubles the wait for the next one.
func TestTopicStalledAndKickBackoff(t *testing.T) {
	const after = 2 * time.Second
	tp := &topic{subscribed: true, waiting: 1, due: t0}
	steps := []struct {
		at   time.Duration
		set  func()
		want bool
	}{
		{at: 2 * time.Second, want: false},                    // exactly StallAfter: not yet
		{at: 2*time.Second + time.Millisecond, want: true},    // overdue
		{at: 3 * time.Second, set: func() { tp.busy = true }}, // a handler runs: not stalled
		{at: 3 * time.Second, set: func() { tp.busy = false }, want: true},
		{at: 3 * time.Second, set: func() { tp.flight = &flight{} }},                                // an RPC runs
		{at: 3 * time.Second, set: func() { tp.flight = nil; tp.kicked(at(3*time.Second), after) }}, // next kick at +5 s
		{at: 4 * time.Second},
		{at: 5 * time.Second, want: true},
		{at: 5 * time.Second, set: func() { tp.kicked(at(5*time.Second), after) }}, // second kick: wait 4 s
		{at: 8 * time.Second},
		{at: 9 * time.Second, want: true},
		{at: 9 * time.Second, set: func() { tp.waiting = 0 }}, // delivered and acknowledged
	}
	for i, st := range steps {
		if st.set != nil {
			st.set()
		}
		if got := tp.stalled(at(st.at), after); got != st.want {
			t.Errorf("step %d: stalled at +%s = %v, want %v (topic %+v)", i, st.at, got, st.want, *tp)
		}
	}
	tp = &topic{}
	for range 10 {
		tp.kicked(t0, after)
	}
	if got := tp.nextKick.Sub(t0); got != maxKickBackoff {
		t.Errorf("after 10 kicks the next waits %s, want the cap %s", got, maxKickBackoff)
	}
}

func TestTopicIdleExpiredConfirms(t *testing.T) {
	const idleFor = time.Minute
	tp := &topic{subscribed: true, used: t0}
	for _, c := range []struct {
		name string
		set  func()
		at   time.Duration
		want bool
	}{
		{"used a second ago", nil, time.Second, false},
		{"unused for a minute", nil, time.Minute, true},
		{"a message waits", func() { tp.waiting = 1 }, time.Hour, false},
		{"a handler runs", func() { tp.waiting, tp.busy = 0, true }, time.Hour, false},
		{"not subscribed", func() { tp.busy, tp.subscribed = false, false }, time.Hour, false},
	} {
		if c.set != nil {
			c.set()
		}
		if got := tp.idle(at(c.at), idleFor); got != c.want {
			t.Errorf("%s: idle = %v, want %v", c.name, got, c.want)
		}
	}

	exp := 20 * time.Minute
	tp = &topic{stored: t0}
	for _, c := range []struct {
		at   time.Duration
		exp  time.Duration
		want bool
	}{
		{16 * time.Minute, exp, false},
		{17 * time.Minute, exp, true}, // expiration less the broker's check interval and margin
		{48 * time.Hour, 0, false},    // never expires
	} {
		if got := tp.expired(at(c.at), c.exp); got != c.want {
			t.Errorf("stored at +0, expiration %s: expired at +%s = %v, want %v", c.exp, c.at, got, c.want)
		}
	}
	if (&topic{}).expired(at(time.Hour), exp) {
		t.Error("a LiteTopic never sent to counts as expired")
	}

	tp = &topic{confirms: []time.Time{at(time.Second), at(3500 * time.Millisecond)}}
	for _, c := range []struct {
		at   time.Duration
		want bool
		left int
	}{
		{500 * time.Millisecond, false, 2},
		{time.Second, true, 1},
		{2 * time.Second, false, 1},
		{10 * time.Second, true, 0},
		{11 * time.Second, false, 0},
	} {
		if got := tp.dueConfirms(at(c.at)); got != c.want || len(tp.confirms) != c.left {
			t.Errorf("dueConfirms at +%s = %v with %d left, want %v with %d", c.at, got, len(tp.confirms), c.want, c.left)
		}
	}
}

// Quota and rate-limit refusals are a FullError (429 queue_full);
// anything else is ErrUnavailable (503), and ILLEGAL_CONSUMER_GROUP is
// also errGroupUnknown (the clients are rebuilt).
func TestMapBrokerError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		full bool
	}{
		{&rmq.ErrRpcStatus{Code: 42902, Message: "lite subscription quota exceeded"}, true},
		{&rmq.ErrRpcStatus{Code: 42901, Message: "lite topic quota exceeded"}, true},
		{&rmq.ErrRpcStatus{Code: 42900, Message: "too many requests"}, true},
		{fmt.Errorf("send: %w", &rmq.ErrRpcStatus{Code: 50001, Message: "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"}), true},
		{&rmq.ErrRpcStatus{Code: 50001, Message: "internal error"}, false},
		{&rmq.ErrRpcStatus{Code: 40402, Message: "topic not found"}, false},
		{&rmq.ErrRpcStatus{Code: 40003, Message: "group not found: GID_PACEGATE"}, false},
		{errors.New("context deadline exceeded"), false},
	} {
		got := mapBrokerError("SubscribeLite lt", "lt", tc.err)
		var st *rmq.ErrRpcStatus
		if unknown := errors.As(tc.err, &st) && st.Code == 40003; errors.Is(got, errGroupUnknown) != unknown {
			t.Errorf("%v: %v, errGroupUnknown %v, want %v", tc.err, got, !unknown, unknown)
		}
		fe, full := consume.IsFull(got)
		if full != tc.full {
			t.Errorf("%v: full = %v, want %v (%v)", tc.err, full, tc.full, got)
			continue
		}
		if full {
			if fe.Scope != consume.ScopeEngine || fe.LiteTopic != "lt" || fe.RetryAfter != DefaultFullRetryAfter || errors.Is(got, consume.ErrUnavailable) {
				t.Errorf("%v: %+v", tc.err, fe)
			}
		} else if !errors.Is(got, consume.ErrUnavailable) {
			t.Errorf("%v: %v, want ErrUnavailable", tc.err, got)
		}
	}
}

// The stall bound follows the delivery lag: with deliveries 3 s late all
// round (a consumer behind its load) a LiteTopic 3 s overdue is not
// stalled; once deliveries are prompt again the bound falls back.
func TestLagTrackerStallBound(t *testing.T) {
	const after = 2 * time.Second
	var l lagTracker
	if got := l.stallBound(after); got != after {
		t.Fatalf("no deliveries yet: bound %s, want %s", got, after)
	}
	for range 200 {
		l.observe(3 * time.Second)
	}
	if got := l.stallBound(after); got < 7900*time.Millisecond || got > 8*time.Second {
		t.Errorf("deliveries 3 s late: bound %s, want about 8 s", got)
	}
	for range 200 {
		l.observe(10 * time.Millisecond)
	}
	if got := l.stallBound(after); got > after+100*time.Millisecond {
		t.Errorf("deliveries prompt again: bound %s, want about %s", got, after)
	}
	l.observe(-time.Second) // a delivery before its due (clock step): counts as 0
	if l.mean < 0 {
		t.Errorf("negative lag %s", l.mean)
	}
}
