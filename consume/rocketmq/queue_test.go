package rocketmq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// gatePool is an Upstreams of one model whose slots the test opens: a
// slot's Do records the request id and returns at once.
type gatePool struct {
	mu     sync.Mutex
	free   int
	onFree func([]string)
	did    chan string
}

func (p *gatePool) TryAcquire(string) (consume.Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free == 0 {
		return nil, false
	}
	p.free--
	return &gateSlot{p: p}, true
}

// TryAcquireHeadroom: this pool has no headroom.
func (p *gatePool) TryAcquireHeadroom(m string) (consume.Slot, bool) { return p.TryAcquire(m) }

func (p *gatePool) Free(string) (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free, 1
}

func (p *gatePool) OnFree(f func([]string)) { p.onFree = f }

// open adds n free slots and tells the consumer.
func (p *gatePool) open(n int) {
	p.mu.Lock()
	p.free += n
	f := p.onFree
	p.mu.Unlock()
	if f != nil {
		f([]string{"m1"})
	}
}

type gateSlot struct {
	p    *gatePool
	once sync.Once
}

func (s *gateSlot) Do(_ context.Context, req *consume.Request, _ consume.Emitter) error {
	s.p.did <- req.ID
	s.Release()
	return nil
}

func (s *gateSlot) Release() { s.once.Do(func() { s.p.open(1) }) }

// noPace never makes a bucket wait.
type noPace struct{}

func (noPace) WaitAt(time.Time, policy.Key, float64) time.Duration { return 0 }
func (noPace) AcquireOrSuspendAt(time.Time, policy.Key, float64) time.Duration {
	return 0
}
func (noPace) Interval(policy.Key) time.Duration { return 0 }

// suspendCount counts the consumer's suspensions by reason.
type suspendCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *suspendCount) Released(policy.Key, time.Duration) {}
func (o *suspendCount) Suspended(_ policy.Key, _ time.Duration, reason string) {
	o.mu.Lock()
	o.n[reason]++
	o.mu.Unlock()
}
func (o *suspendCount) Dropped(policy.Key, string) {}
func (o *suspendCount) Panicked(policy.Key)        {}

func (o *suspendCount) get(reason string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[reason]
}

// TestQueueOnBroker runs consume.Queue and Consumer on the broker: the
// bucket's backlog limit is the Queue's (a refused request never reaches
// the broker), a bucket waiting for a full pool is suspended and polls,
// and the slot freed for it is held until its next delivery, which takes
// it; the requests are dispatched in order and the backlog empties.
func TestQueueOnBroker(t *testing.T) {
	in := sharedInstance(t)
	q := consume.NewQueue(in.b, in.b.ReplicaID())
	pool := &gatePool{did: make(chan string, 10)}
	obs := &suspendCount{n: map[string]int{}}
	cons := consume.NewConsumer(consume.ConsumerConfig{Queue: q, Pacer: noPace{}, Upstreams: pool, Observer: obs})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cons.Close(ctx)
	}()
	k := policy.Key{Tenant: "queue-" + runID, Model: "m1"}
	lt := q.LiteTopic(k)
	var refusedSeen atomic.Bool
	refused := fmt.Sprintf("q-%s-x", runID)
	defer in.r.set(lt, func(ctx context.Context, d *consume.Delivery) consume.Result {
		if d.ID == refused {
			refusedSeen.Store(true)
		}
		return cons.Handle(ctx, d)
	})()

	const limit = 3
	submit := func(id string) (*consume.Pending, error) {
		p, err := q.Submit(t.Context(), &consume.Request{ID: id, Key: k, Body: []byte(`{}`), Weight: 1, Band: 1, MaxBacklog: limit, Submitted: time.Now()})
		if err == nil {
			waits.published(id)
		}
		return p, err
	}
	var ps []*consume.Pending
	for i := range limit {
		p, err := submit(fmt.Sprintf("q-%s-%d", runID, i))
		if err != nil {
			t.Fatalf("Submit %d: %v", i, err)
		}
		ps = append(ps, p)
	}
	_, err := submit(refused)
	var fe *consume.FullError
	if !errors.As(err, &fe) || fe.Scope != consume.ScopeBucket || fe.Limit != limit || fe.LiteTopic != lt || !errors.Is(err, consume.ErrFull) {
		t.Fatalf("Submit beyond the backlog limit = %v, want a bucket FullError with limit %d on %s", err, limit, lt)
	}
	if n := q.Backlog(k); n != limit {
		t.Fatalf("Backlog = %d, want %d", n, limit)
	}

	// The pool is full: the bucket waits, suspended for 200 ms at a time.
	deadline := time.Now().Add(deliveryTimeout)
	for obs.get(consume.ReasonCapacityRecheck) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no capacity rechecks within %s (capacity %d)", deliveryTimeout, obs.get(consume.ReasonCapacity))
		}
		time.Sleep(20 * time.Millisecond)
	}
	opened := time.Now()
	pool.open(1)
	for i, p := range ps {
		id := recv(t, pool.did, deliveryTimeout, fmt.Sprintf("dispatch %d", i))
		if i == 0 {
			t.Logf("first dispatch %s after the slot freed (the grant waits for the bucket's next delivery)", time.Since(opened).Round(time.Millisecond))
		}
		if id != p.Req.ID {
			t.Fatalf("dispatch %d = %s, want %s (FIFO)", i, id, p.Req.ID)
		}
		for ev := recv(t, p.Events(), deliveryTimeout, "event"); ev.Kind != consume.EventDone; ev = recv(t, p.Events(), deliveryTimeout, "event") {
			if ev.Kind == consume.EventError {
				t.Fatalf("%s: %v", id, ev.Err)
			}
		}
		q.Finish(p)
	}
	if n := q.Backlog(k); n != 0 {
		t.Errorf("Backlog = %d after every request was dispatched", n)
	}
	// Nothing of the refused request reached the broker: it would have
	// been delivered right after the three.
	time.Sleep(time.Second)
	if refusedSeen.Load() {
		t.Fatalf("%s was refused by the Queue but delivered by the broker", refused)
	}
	// Room again: the refused id can now be submitted, and is dispatched.
	p, err := submit(refused)
	if err != nil {
		t.Fatalf("Submit after the backlog drained: %v", err)
	}
	defer q.Finish(p)
	if id := recv(t, pool.did, deliveryTimeout, "dispatch of the resubmitted request"); id != refused {
		t.Fatalf("dispatched %s, want %s", id, refused)
	}
	t.Logf("capacity suspensions: %d joins, %d rechecks", obs.get(consume.ReasonCapacity), obs.get(consume.ReasonCapacityRecheck))
	if q.Len() != 1 {
		t.Errorf("Queue.Len = %d, want 1 (the last request, not yet finished)", q.Len())
	}
}
