package rocketmq

import (
	"sort"
	"time"
)

// maxActionsPerSweep bounds the RPCs one watchdog sweep starts, so that a
// broker restart with thousands of LiteTopics to re-subscribe is spread
// over sweeps instead of queueing thousands of goroutines at once.
const maxActionsPerSweep = 256

// maxKicksPerSweep bounds the stalled LiteTopics re-subscribed per sweep
// (128/s at the default interval): a stall is one LiteTopic's, and a
// flood of them means the consumer is behind, which kicks cannot fix.
const maxKicksPerSweep = 32

// pressureIdle is how long a LiteTopic must be unused before it is
// unsubscribed while the process is at a subscription quota (its own
// MaxLiteTopics, or a quota error from the broker in the last minute).
const pressureIdle = 5 * time.Second

// WatchdogStats counts what the watchdog did; see [Backend.WatchdogStats].
type WatchdogStats struct {
	Subscribes   int64 // LiteTopics with waiting messages subscribed by the watchdog (after a failed or slow SubscribeLite, or a client rebuild)
	Confirms     int64 // PARTIAL_ADDs sent again after a subscribe overlapped the client's 30 s full sync
	Kicks        int64 // stalled LiteTopics unsubscribed and subscribed again
	Unsubscribes int64 // idle LiteTopics unsubscribed
	Subscribed   int   // LiteTopics subscribed now (or being subscribed)
}

// WatchdogStats reports the watchdog's counters.
func (b *Backend) WatchdogStats() WatchdogStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.wstats
	s.Subscribed = b.nsubs
	return s
}

// kickWatchdog asks the watchdog to sweep now.
func (b *Backend) kickWatchdog() {
	select {
	case b.wkick <- struct{}{}:
	default:
	}
}

// watchdogLoop sweeps every WatchdogInterval until Close.
func (b *Backend) watchdogLoop() {
	defer close(b.wdone)
	t := time.NewTicker(b.cfg.WatchdogInterval)
	defer t.Stop()
	for {
		select {
		case <-b.loopQuit:
			return
		case <-t.C:
		case <-b.wkick:
		}
		b.sweep(time.Now())
	}
}

// sweep decides, for every LiteTopic, whether it needs an RPC, and starts
// them (at most maxActionsPerSweep):
//
//   - waiting messages but no subscription on the current clients (a
//     SubscribeLite that failed or was slow, a client rebuild, an expiry):
//     subscribe;
//   - a subscribe that overlapped the client's full sync: send the
//     PARTIAL_ADD again (see syncTickWithin);
//   - the oldest waiting message overdue by StallAfter (plus twice the
//     current delivery lag, see lagTracker) with nothing being handled: unsubscribe and subscribe, which makes the broker dispatch
//     the LiteTopic afresh (a fresh registration is dispatched; a repeated
//     PARTIAL_ADD of a registered name is not). This also heals a lost
//     dispatch event or long-poll wake-up in the broker;
//   - idle for IdleUnsubscribe (or pressureIdle under quota pressure):
//     unsubscribe, least recently used first, so the process stays within
//     the broker's per-client quota (lite.sub.client.quota).
func (b *Backend) sweep(now time.Time) {
	cl := b.cl.Load()
	if cl == nil || !b.health.Load().up {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return
	}
	pressure := (b.cfg.MaxLiteTopics > 0 && b.nsubs >= b.cfg.MaxLiteTopics*9/10) ||
		(!b.quotaHit.IsZero() && now.Sub(b.quotaHit) < time.Minute)
	var idle []string
	started, kicks := 0, 0
	bound := b.lag.stallBound(b.cfg.StallAfter)
	for lt, t := range b.topics {
		if started >= maxActionsPerSweep {
			break
		}
		if t.flight != nil {
			continue
		}
		switch {
		case t.waiting > 0 && (!t.subscribed || t.gen != cl.gen) && !now.Before(t.nextKick):
			b.wstats.Subscribes++
			b.startFlightLocked(lt, t, actSubscribe, cl)
		case t.dueConfirms(now):
			b.wstats.Confirms++
			b.startFlightLocked(lt, t, actSubscribe, cl)
		case t.subscribed && kicks < maxKicksPerSweep && t.stalled(now, bound):
			kicks++
			b.wstats.Kicks++
			b.log.Warn("rocketmq: LiteTopic stalled: oldest message overdue with no delivery; subscribing it again",
				"litetopic", lt, "overdue", now.Sub(t.due).Round(time.Millisecond), "waiting", t.waiting, "kicks", t.kicks)
			t.kicked(now, bound)
			b.startFlightLocked(lt, t, actResubscribe, cl)
		case !t.subscribed && t.waiting == 0 && !t.busy:
			delete(b.topics, lt) // a subscribe that failed for a message that was then not sent
			continue
		case t.idle(now, b.cfg.IdleUnsubscribe) || (pressure && t.idle(now, pressureIdle)):
			idle = append(idle, lt)
			continue
		default:
			continue
		}
		started++
	}
	sort.Slice(idle, func(i, j int) bool { return b.topics[idle[i]].used.Before(b.topics[idle[j]].used) })
	for _, lt := range idle {
		if started >= maxActionsPerSweep {
			break
		}
		b.wstats.Unsubscribes++
		b.startFlightLocked(lt, b.topics[lt], actUnsubscribe, cl)
		started++
	}
}
