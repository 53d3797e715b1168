package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/pacegate/pacegate/consume"
)

// subAction is one subscription RPC the backend runs for a LiteTopic.
type subAction uint8

const (
	actSubscribe   subAction = iota // SubscribeLite (PARTIAL_ADD)
	actResubscribe                  // UnSubscribeLite then SubscribeLite: a fresh registration, which the broker dispatches
	actUnsubscribe                  // UnSubscribeLite: the LiteTopic went idle
)

func (a subAction) String() string {
	return [...]string{"subscribe", "resubscribe", "unsubscribe"}[a]
}

// ensureSubscribed makes sure lt is subscribed on the current clients
// before a message is sent to it. It waits for the subscription at most
// SubscribeWait (and never past ctx): a slow SubscribeLite must not fail
// the publish (a burst of new LiteTopics would otherwise turn into 503s),
// and the broker keeps the message until the subscription lands, which
// the subscription RPC, still running, or the watchdog then completes.
// It fails only when the subscription is refused for good reasons: a
// quota (a *consume.FullError, 429) or the backend closing.
func (b *Backend) ensureSubscribed(ctx context.Context, lt string) error {
	wait := time.NewTimer(b.cfg.SubscribeWait)
	defer wait.Stop()
	for {
		f, err := b.subscribeStart(lt)
		if err != nil || f == nil {
			return err
		}
		select {
		case <-f.done:
			if _, full := consume.IsFull(f.err); full || errors.Is(f.err, consume.ErrClosed) {
				return f.err
			}
			if errors.Is(f.err, errGroupUnknown) {
				return f.err // nothing of this group is consumed until the clients are rebuilt
			}
			if f.err != nil {
				return nil // the watchdog subscribes again; the message waits in the broker
			}
			// Loop: the flight may have been an unsubscribe.
		case <-wait.C:
			return nil
		case <-ctx.Done():
			return nil // the send reports ctx's error
		}
	}
}

// subscribeStart returns the flight to wait for before lt can be used
// (a new subscribe, or the RPC already in progress), or nil when lt is
// subscribed on the current clients and not expired.
func (b *Backend) subscribeStart(lt string) (*flight, error) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[lt]
	if t == nil { // reserve creates it; a missing one means Close ran
		return nil, consume.ErrClosed
	}
	cl := b.cl.Load()
	if cl == nil {
		return nil, fmt.Errorf("%w: rocketmq at %s: not connected", consume.ErrUnavailable, b.cfg.Endpoint)
	}
	if t.flight != nil {
		return t.flight, nil
	}
	if t.subscribed && t.gen == cl.gen && !t.expired(now, b.cfg.LiteTopicExpiration) {
		return nil, nil
	}
	if !t.subscribed && b.cfg.MaxLiteTopics > 0 && b.nsubs >= b.cfg.MaxLiteTopics {
		b.kickWatchdog() // unsubscribe idle LiteTopics now
		return nil, &consume.FullError{Scope: consume.ScopeEngine, LiteTopic: lt,
			Limit: int64(b.cfg.MaxLiteTopics), RetryAfter: DefaultFullRetryAfter}
	}
	return b.startFlightLocked(lt, t, actSubscribe, cl), nil
}

// startFlightLocked starts action on lt in a goroutine the backend owns;
// requires mu held and t.flight nil.
func (b *Backend) startFlightLocked(lt string, t *topic, a subAction, cl *clients) *flight {
	f := &flight{done: make(chan struct{})}
	if b.closing {
		f.err = consume.ErrClosed
		close(f.done)
		return f
	}
	t.flight = f
	if a == actSubscribe && !t.subscribed {
		b.nsubs++ // counted from the start: MaxLiteTopics bounds what is being subscribed too
	}
	b.bg.Add(1) // under mu while !closing: cannot race Close's Wait
	go func() {
		defer b.bg.Done()
		b.runFlight(lt, a, cl, f)
	}()
	return f
}

// runFlight runs one subscription RPC (at most SubscribeConcurrency at a
// time) and records its outcome in lt's topic.
func (b *Backend) runFlight(lt string, a subAction, cl *clients, f *flight) {
	var err error
	var t0, t1 time.Time
	select {
	case b.subSem <- struct{}{}:
		t0 = time.Now()
		err = b.rpc(a, lt, cl)
		t1 = time.Now()
		<-b.subSem
	case <-b.loopQuit:
		err = consume.ErrClosed
	}
	if err != nil && !errors.Is(err, consume.ErrClosed) {
		b.log.Warn("rocketmq: subscription call failed", "action", a.String(), "litetopic", lt, "err", err)
	}
	b.mu.Lock()
	t := b.topics[lt]
	if t != nil {
		t.flight = nil
		b.flightDoneLocked(lt, t, a, cl, err, t0, t1)
	}
	f.err = err
	b.mu.Unlock()
	close(f.done)
}

// flightDoneLocked updates t after an RPC; requires mu held.
func (b *Backend) flightDoneLocked(lt string, t *topic, a subAction, cl *clients, err error, t0, t1 time.Time) {
	wasSub := t.subscribed
	switch {
	case a == actUnsubscribe && err == nil:
		t.subscribed = false
		if t.waiting == 0 && !t.busy {
			delete(b.topics, lt)
		}
	case a == actUnsubscribe: // still subscribed
	case err == nil:
		t.subscribed, t.gen = true, cl.gen
		t.confirms = t.confirms[:0]
		if tick, ok := syncTickWithin(cl.started, t0, t1); ok {
			for _, d := range confirmAfter {
				t.confirms = append(t.confirms, tick.Add(d))
			}
		}
	case a == actResubscribe:
		t.subscribed = false // unknown: the unsubscribe may have gone through
	default:
		// A failed subscribe of a subscribed name (a confirmation) leaves
		// it subscribed; a failed first subscribe leaves it unsubscribed.
	}
	if wasSub && !t.subscribed {
		b.nsubs--
	} else if !wasSub && !t.subscribed && a == actSubscribe {
		b.nsubs-- // counted in startFlightLocked
	}
	if err != nil && a != actUnsubscribe {
		t.kicked(time.Now(), b.cfg.StallAfter) // the watchdog retries it with backoff
	}
	if _, full := consume.IsFull(err); full {
		b.quotaHit = t1
	}
}

// rpc sends one subscription change for lt on cl's consumer.
func (b *Backend) rpc(a subAction, lt string, cl *clients) error {
	var err error
	switch a {
	case actUnsubscribe:
		err = cl.consumer.UnSubscribeLite(lt)
	case actResubscribe:
		if err = cl.consumer.UnSubscribeLite(lt); err == nil {
			err = cl.consumer.SubscribeLite(lt)
		}
	default:
		err = cl.consumer.SubscribeLite(lt)
	}
	if err == nil {
		return nil
	}
	err = mapBrokerError(fmt.Sprintf("SubscribeLite %s", lt), lt, err)
	if errors.Is(err, errGroupUnknown) && b.cl.Load() == cl { // a stale flight of replaced clients proves nothing
		// The reason /readyz shows names no LiteTopic: a LiteTopic is a tenant's.
		lost := fmt.Errorf("%w %s", errGroupUnknown, b.cfg.Group)
		b.groupLost.Store(&lost)
	}
	b.kickProbe()
	return err
}

// errGroupUnknown marks a call the proxy refused with
// ILLEGAL_CONSUMER_GROUP: it does not know the consumer group. After a
// broker restart the proxy says so for a while (its cache of the group
// was refreshed while no broker was registered: 8 s here, 30 s and more
// in a CI run). No LiteTopic can be subscribed meanwhile, so a message
// published then would wait on a LiteTopic nothing consumes. The probe
// loop rebuilds the clients instead (see groupLost): a new consumer
// cannot start until the proxy knows the group again, which makes its
// start the signal to publish again.
var errGroupUnknown = errors.New("the proxy does not know the consumer group")

// mapBrokerError turns a client error into what Publish returns: a quota
// or rate limit of the broker or proxy (LiteTopic count, subscriptions per
// client, LMQ count, TOO_MANY_REQUESTS) is a *consume.FullError (the
// gateway answers 429 queue_full with a Retry-After), anything else is
// consume.ErrUnavailable (503); an unknown consumer group is also
// errGroupUnknown.
func mapBrokerError(what, lt string, err error) error {
	var st *rmq.ErrRpcStatus
	if errors.As(err, &st) && isQuotaCode(st.Code, st.Message) {
		return fmt.Errorf("rocketmq %s: %s: %w", what, st.Message, &consume.FullError{
			Scope: consume.ScopeEngine, LiteTopic: lt, RetryAfter: DefaultFullRetryAfter})
	}
	if st != nil && v2.Code(st.Code) == v2.Code_ILLEGAL_CONSUMER_GROUP {
		return fmt.Errorf("%w: rocketmq %s: %w: %v", consume.ErrUnavailable, what, errGroupUnknown, err)
	}
	return fmt.Errorf("%w: rocketmq %s: %v", consume.ErrUnavailable, what, err)
}

// isQuotaCode reports whether a proxy status is a quota or rate limit:
// 429xx (TOO_MANY_REQUESTS, LITE_TOPIC_QUOTA_EXCEEDED,
// LITE_SUBSCRIPTION_QUOTA_EXCEEDED), or the broker's LMQ limit
// (LMQ_CONSUME_QUEUE_NUM_EXCEEDED, which the proxy passes on as text).
func isQuotaCode(code int32, msg string) bool {
	switch v2.Code(code) {
	case v2.Code_TOO_MANY_REQUESTS, v2.Code_LITE_TOPIC_QUOTA_EXCEEDED, v2.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED:
		return true
	}
	return code/100 == 429 || strings.Contains(strings.ToUpper(msg), "QUOTA") || strings.Contains(msg, "LMQ_CONSUME_QUEUE_NUM_EXCEEDED")
}
