// Package consumetest builds consume.Queue states for tests of the
// packages that read them (the admin API, the metrics), through the
// queue's exported API only: requests are submitted as the gateway
// submits them and suspended as the consumer suspends them.
package consumetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// Backend accepts every message and delivers none by itself; it records
// what was published, per LiteTopic. It is safe for concurrent use.
type Backend struct {
	mu   sync.Mutex
	msgs map[string][]consume.Message // LiteTopic → messages, oldest first
}

var _ consume.Backend = (*Backend)(nil)

// Publish implements [consume.Backend.Publish].
func (b *Backend) Publish(_ context.Context, m *consume.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.msgs == nil {
		b.msgs = map[string][]consume.Message{}
	}
	b.msgs[m.LiteTopic] = append(b.msgs[m.LiteTopic], *m)
	return nil
}

// Start implements [consume.Backend.Start].
func (b *Backend) Start(consume.Handler) error { return nil }

// Close implements [consume.Backend.Close].
func (b *Backend) Close(context.Context) (consume.Leftover, error) { return consume.Leftover{}, nil }

// MinSuspend implements [consume.Backend.MinSuspend].
func (b *Backend) MinSuspend() time.Duration { return time.Millisecond }

// Ready implements [consume.Backend.Ready].
func (b *Backend) Ready(context.Context) error { return nil }

// first is the oldest message published to lt.
func (b *Backend) first(lt string) (consume.Message, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.msgs[lt]) == 0 {
		return consume.Message{}, false
	}
	return b.msgs[lt][0], true
}

// Queue is a consume.Queue on a recording Backend.
type Queue struct {
	*consume.Queue
	Backend *Backend
	n       int
}

// New returns an empty Queue.
func New() *Queue {
	b := &Backend{}
	return &Queue{Queue: consume.NewQueue(b, ""), Backend: b}
}

// Submit queues one request in bucket k, submitted at at, and returns it.
func (q *Queue) Submit(k policy.Key, at time.Time) *consume.Pending {
	q.n++
	p, err := q.Queue.Submit(context.Background(), &consume.Request{ID: fmt.Sprint("req-", q.n), Key: k, Submitted: at})
	if err != nil {
		panic(err) // the recording backend never fails
	}
	return p
}

// Suspend delivers bucket k's oldest request to a consumer whose pacer
// says wait d, so that the bucket is suspended for d as it would be.
func (q *Queue) Suspend(k policy.Key, d time.Duration) {
	m, ok := q.Backend.first(q.LiteTopic(k))
	if !ok {
		panic("consumetest: nothing queued in " + k.String())
	}
	c := consume.NewConsumer(consume.ConsumerConfig{Queue: q.Queue, Pacer: waitPacer(d), Upstreams: noUpstreams{}})
	c.Handle(context.Background(), &consume.Delivery{Message: m, Attempt: 1})
}

type waitPacer time.Duration

func (p waitPacer) WaitAt(time.Time, policy.Key, float64) time.Duration { return time.Duration(p) }
func (p waitPacer) AcquireOrSuspendAt(time.Time, policy.Key, float64) time.Duration {
	return time.Duration(p)
}
func (p waitPacer) Interval(policy.Key) time.Duration { return time.Duration(p) }

type noUpstreams struct{}

func (noUpstreams) TryAcquire(string) (consume.Slot, bool)         { return nil, false }
func (noUpstreams) TryAcquireHeadroom(string) (consume.Slot, bool) { return nil, false }
func (noUpstreams) OnFree(func([]string))                          {}
func (noUpstreams) Free(string) (int, int)                         { return 0, 0 }
