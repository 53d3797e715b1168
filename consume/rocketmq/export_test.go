package rocketmq

import (
	"context"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// DropOnBroker unsubscribes lt on the current consumer behind the
// backend's back: the broker and the client forget the name while the
// backend still counts it as subscribed. That is the state the client's
// sync race or a LiteTopic expiry leaves behind, made on demand.
//
// Two things heal that state without the watchdog, and would make a test
// of the watchdog pass or fail by luck: a confirmation still due for lt
// (its subscribe overlapped a full sync), and a full sync in flight at the
// moment of the unsubscribe (it still holds lt and re-adds it). So
// DropOnBroker first waits, bounded by ctx, until lt has no confirmation
// left and the client's next full sync is at least quiet away, and not
// within a second after the last one.
func DropOnBroker(ctx context.Context, b *Backend, lt string, quiet time.Duration) error {
	for !quietForDrop(b, lt, time.Now(), quiet) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return b.cl.Load().consumer.UnSubscribeLite(lt)
}

func quietForDrop(b *Backend, lt string, now time.Time, quiet time.Duration) bool {
	cl := b.cl.Load()
	b.mu.Lock()
	t := b.topics[lt]
	pending := t == nil || !t.subscribed || len(t.confirms) > 0 || t.flight != nil
	b.mu.Unlock()
	if pending {
		return false
	}
	since := now.Sub(cl.started) % syncPeriod
	return since > syncMargin+time.Second && syncPeriod-since > quiet+syncMargin
}

// StallBound is how overdue a LiteTopic must be now for the watchdog to
// count it as stalled (StallAfter plus twice the current delivery lag).
func StallBound(b *Backend) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lag.stallBound(b.cfg.StallAfter)
}

// RefuseGroup makes the backend's current consumer answer every
// SubscribeLite as the proxy does while it does not know the consumer
// group (after a broker restart, until its cache of the group is
// refreshed): ILLEGAL_CONSUMER_GROUP. Clients built after it, by a
// rebuild, are real again.
func RefuseGroup(b *Backend) {
	cl := *b.cl.Load()
	cl.consumer = groupRefuser{cl.consumer, b.cfg.Group}
	b.cl.Store(&cl)
}

type groupRefuser struct {
	rmq.LitePushConsumer
	group string
}

func (g groupRefuser) SubscribeLite(string) error {
	return &rmq.ErrRpcStatus{Code: int32(v2.Code_ILLEGAL_CONSUMER_GROUP), Message: "group not found: " + g.group}
}

// Generation numbers the backend's clients: 1 at New, +1 per rebuild.
func Generation(b *Backend) uint64 { return b.cl.Load().gen }
