package rocketmq

import (
	"time"
)

// The v5.1.4 LitePushConsumer sends its whole local LiteTopic set
// (COMPLETE_ADD) from Start and then every syncPeriod, on a ticker started
// at the end of Start (lite_push_consumer.go). SubscribeLite sends its
// PARTIAL_ADD first and adds the name to that set only afterwards, so a
// tick that snapshots the set while a PARTIAL_ADD is in flight sends a set
// without the name; the broker applies it after the PARTIAL_ADD and drops
// the registration it has just made (addCompleteSubscription removes what
// the complete set lacks). Nothing then tells the broker about the name
// until the next tick, 30 s later: the delivery stall. The backend cannot
// order the client's calls, but it knows when the ticks fire, so it
// re-sends the PARTIAL_ADD after any tick its subscribe overlapped (see
// syncTickWithin and confirmAfter), and the watchdog catches whatever is
// left (see stalled).
const syncPeriod = 30 * time.Second

// syncMargin widens the window in which a subscribe counts as overlapping
// a sync: the ticker's base is known only to within the time its
// goroutine took to start, and the proxy applies a sync to the broker
// after it answered the client (measured: a PARTIAL_ADD sent 13 ms after
// Start's own COMPLETE_ADD had returned still lost to it).
const syncMargin = 500 * time.Millisecond

// confirmAfter are the delays after an overlapped tick at which the
// subscription is sent again. The stale COMPLETE_ADD usually lands within
// ~250 ms; by 3.5 s it has landed or the client gave up on it (its request
// timeout is 3 s).
var confirmAfter = [...]time.Duration{time.Second, 3500 * time.Millisecond}

// syncTickWithin returns the client's first full sync (base +
// k·syncPeriod, k ≥ 0; k = 0 is the one Start itself sends) that falls
// within [from, to] widened by syncMargin, where base is when the
// consumer's Start returned. Syncs before from are harmless: the name was
// not yet sent; syncs after to are harmless: the name is in the client's
// set by then.
func syncTickWithin(base, from, to time.Time) (time.Time, bool) {
	if base.IsZero() {
		return time.Time{}, false
	}
	lo := from.Add(-syncMargin)
	k := int64(0)
	if lo.After(base) {
		k = int64(lo.Sub(base) / syncPeriod)
		if base.Add(time.Duration(k) * syncPeriod).Before(lo) {
			k++
		}
	}
	tick := base.Add(time.Duration(k) * syncPeriod)
	return tick, !tick.After(to.Add(syncMargin))
}

// topic is what the backend knows about one LiteTopic of this process.
// All fields are guarded by Backend.mu.
type topic struct {
	// subscribed: the broker has the subscription, as far as this process
	// knows, on the clients of generation gen.
	subscribed bool
	gen        uint64
	// flight is the SubscribeLite or UnSubscribeLite in progress, if any.
	flight *flight
	// confirms are the instants at which to send the PARTIAL_ADD again,
	// because the subscribe overlapped the client's full sync.
	confirms []time.Time
	// waiting counts this process's messages on the LiteTopic that were
	// published (or are being sent) and are not yet acknowledged; sending
	// those of them whose send has not returned yet (they cannot be
	// overdue: the broker does not have them yet).
	waiting, sending int
	// due is when the oldest stored waiting message could be delivered:
	// when its send returned, or when the LiteTopic's previous message was
	// answered, or when its Suspend ends.
	due time.Time
	// busy: a handler call for the LiteTopic is running.
	busy bool
	// kicks counts the watchdog's re-subscribes since the last delivery;
	// nextKick is the earliest time for the next one.
	kicks    int
	nextKick time.Time
	// used is the last publish or delivery (for idle unsubscribes); stored
	// the last successful send (the broker's expiry clock starts there).
	used, stored time.Time
}

// flight is one subscription RPC; done is closed when err is set.
type flight struct {
	done chan struct{}
	err  error
}

// stalled reports whether t's oldest waiting message is overdue: nothing
// is being handled, and the message could have been delivered more than
// after ago.
func (t *topic) stalled(now time.Time, after time.Duration) bool {
	return t.waiting-t.sending > 0 && !t.busy && t.flight == nil && now.Sub(t.due) > after && !now.Before(t.nextKick)
}

// kicked records a watchdog re-subscribe: the next one waits twice as
// long, up to maxKickBackoff.
func (t *topic) kicked(now time.Time, after time.Duration) {
	t.kicks++
	wait := after
	for i := 1; i < t.kicks && wait < maxKickBackoff; i++ {
		wait *= 2
	}
	t.nextKick = now.Add(min(wait, maxKickBackoff))
}

// lagTracker follows how late deliveries are across all LiteTopics (an
// exponentially weighted mean of "delivered at − due"), so that the
// watchdog tells one stalled LiteTopic from a consumer that is simply
// behind: under a load above what the consumer drains, every LiteTopic
// is overdue, and re-subscribing them all would only add RPCs.
type lagTracker struct {
	mean time.Duration
}

// lagWeight is the weight of one delivery in the mean.
const lagWeight = 0.05

func (l *lagTracker) observe(lag time.Duration) {
	l.mean += time.Duration(lagWeight * float64(max(lag, 0)-l.mean))
}

// stallBound is how overdue a LiteTopic must be to count as stalled:
// StallAfter plus twice the current delivery lag.
func (l *lagTracker) stallBound(after time.Duration) time.Duration {
	return after + 2*l.mean
}

// maxKickBackoff bounds the wait between two watchdog re-subscribes of one
// LiteTopic.
const maxKickBackoff = 30 * time.Second

// idle reports whether t can be unsubscribed: subscribed, nothing waiting
// or running, no RPC in progress, unused for at least idleFor.
func (t *topic) idle(now time.Time, idleFor time.Duration) bool {
	return t.subscribed && t.waiting == 0 && !t.busy && t.flight == nil && now.Sub(t.used) >= idleFor
}

// expired reports whether the broker may have deleted t's LiteTopic (its
// lite.topic.expiration ran out since the last message was stored; the
// broker checks every 2 minutes, hence the guard). The broker then drops
// the subscription too, and so does the client, so the name must be
// subscribed again before its next message.
func (t *topic) expired(now time.Time, expiration time.Duration) bool {
	return expiration > 0 && !t.stored.IsZero() && now.Sub(t.stored) >= expiration-expiryGuard
}

// expiryGuard is how long before lite.topic.expiration a LiteTopic counts
// as possibly deleted: the broker's TTL check interval plus a margin.
const expiryGuard = 3 * time.Minute

// dueConfirms returns and removes t's confirmations due at now.
func (t *topic) dueConfirms(now time.Time) bool {
	n := 0
	for n < len(t.confirms) && !t.confirms[n].After(now) {
		n++
	}
	t.confirms = t.confirms[n:]
	return n > 0
}
