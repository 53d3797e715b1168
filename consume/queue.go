package consume

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Queue is the one owner of every queued request's state. The gateway
// submits a request to it and finishes it when the handler returns; the
// consumer finds it again by id. In between the Queue keeps:
//
//   - the registry: request id → [Pending], the in-process response
//     channel of the single-process design (a sync.Map: entries are
//     written once and read by another goroutine);
//   - the ledger: each bucket's waiting requests, matched by the sequence
//     number each got at submission, the one place that counts a bucket's
//     backlog and enforces its limit;
//   - the LiteTopic naming, and the backend the messages go through.
//
// Make it with [NewQueue]. It is safe for concurrent use.
type Queue struct {
	backend Backend
	names   *topicNames // the LiteTopic naming, remembered per bucket
	ledger  *ledger
	reg     sync.Map // request id → *Pending
	count   atomic.Int64

	// onIdle is told when a bucket's queue empties as a request leaves
	// it undispatched (the fair-share scheduler lifts a bucket that
	// returns from idleness; a dispatch tells it with the request's
	// start, see release), and onLeave when a request leaves its bucket
	// without being dispatched (its client went away, or its band's
	// max_wait passed): the capacity gate takes the bucket out of the
	// wait set, or gives back a slot granted to it, at once. Set once,
	// before use, by NewConsumer.
	onIdle  func(policy.Key)
	onLeave func(policy.Key)
}

// NewQueue returns a Queue publishing to b. replica goes into LiteTopic
// names so that several replicas can share one broker; empty is fine for
// a single process.
func NewQueue(b Backend, replica string) *Queue {
	return &Queue{backend: b, names: newTopicNames(replica), ledger: newLedger()}
}

// Backend is the queue's backend.
func (q *Queue) Backend() Backend { return q.backend }

// LiteTopic is the LiteTopic of bucket k in this replica.
func (q *Queue) LiteTopic(k policy.Key) string {
	return q.names.get(k)
}

// Submit registers req and publishes it to its bucket's LiteTopic. The
// returned Pending carries the response; the caller must call Finish
// with it when done. Submit fails with a *FullError when the bucket holds
// req.MaxBacklog requests (Scope ScopeBucket, no RetryAfter: the caller
// knows the bucket's rate) or the backend is full, with ErrUnavailable
// when the backend cannot be reached, and with ctx's error. Nothing is
// left behind when it fails.
func (q *Queue) Submit(ctx context.Context, req *Request) (*Pending, error) {
	return q.SubmitTo(ctx, req, nil)
}

// SubmitTo is Submit with the response's events delivered to sink rather
// than on the Pending's channel (see [Sink]); a nil sink is Submit. A
// request with a sink that is delivered inline and dispatched while
// SubmitTo publishes it (the embedded engine delivers to an idle
// LiteTopic so; see [Delivery].Inline) makes its upstream call on the
// caller's goroutine: SubmitTo then returns once the response has ended,
// all of it delivered to the sink.
func (q *Queue) SubmitTo(ctx context.Context, req *Request, sink Sink) (*Pending, error) {
	p := new(Pending)
	if err := q.SubmitInto(ctx, p, req, sink); err != nil {
		return nil, err
	}
	return p, nil
}

// SubmitInto is SubmitTo into p, a zero Pending that the caller keeps in
// its own state of the request (the gateway's exchange holds it): the
// request then costs one allocation fewer, and its largest is no longer
// made on the queue's hop, between the publish and the upstream call. p
// must be zero: one submitted before panics.
func (q *Queue) SubmitInto(ctx context.Context, p *Pending, req *Request, sink Sink) error {
	if p.Req != nil {
		panic("consume: SubmitInto with a Pending already submitted")
	}
	seq, _, ok := q.ledger.add(req.Key, req.Submitted, req.MaxBacklog)
	if !ok {
		return &FullError{Scope: ScopeBucket, LiteTopic: q.LiteTopic(req.Key), Limit: int64(req.MaxBacklog)}
	}
	p.init(ctx, req, sink)
	p.seq = seq
	if sink != nil {
		sink.Attach(p)
	}
	q.reg.Store(req.ID, p)
	q.count.Add(1)
	p.msg = Message{ID: req.ID, LiteTopic: q.LiteTopic(req.Key), Key: req.Key, Body: req.Body}
	err := q.backend.Publish(ctx, &p.msg)
	if err != nil && p.Abandon() {
		q.Finish(p)
		return err
	}
	// Published (or the backend reported an error for a message it
	// delivered all the same: the request is dispatched, and goes on).
	p.submittedBy()
	return nil
}

// Finish ends p's stay: its registry entry goes, and if it was never
// dispatched it is withdrawn from its bucket at once, so that queue
// positions and predicted waits stop counting it. Its message, if still
// in the LiteTopic, is dropped by the consumer when delivered. Finish is
// idempotent.
func (q *Queue) Finish(p *Pending) {
	if _, ok := q.reg.LoadAndDelete(p.Req.ID); ok {
		q.count.Add(-1)
	}
	p.Abandon() // a no-op once dispatched
	q.depart(p)
}

// lookup finds the waiting request with id.
func (q *Queue) lookup(id string) (*Pending, bool) {
	v, ok := q.reg.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*Pending), true
}

// depart removes p from its bucket's ledger, once, without an upstream:
// its client went away, or it was never dispatched.
func (q *Queue) depart(p *Pending) {
	// Once departed (as every dispatched request is at its Finish), no
	// clock is read.
	if !p.departed.CompareAndSwap(false, true) {
		return
	}
	if q.ledger.remove(p.Req.Key, p.seq, false, time.Now()) && q.onIdle != nil {
		q.onIdle(p.Req.Key)
	}
	if q.onLeave != nil {
		q.onLeave(p.Req.Key)
	}
}

// release removes p from its bucket's ledger at now, once, as it leaves
// for an upstream. It reports whether the bucket's queue emptied: the
// caller tells the scheduler so with the request's start, under one
// lock (see [fairshare.Scheduler.StartCosting]), rather than onIdle.
func (q *Queue) release(p *Pending, now time.Time) (emptied bool) {
	if !p.departed.CompareAndSwap(false, true) {
		return false
	}
	return q.ledger.remove(p.Req.Key, p.seq, true, now)
}

// Len is the number of requests submitted and not yet finished.
func (q *Queue) Len() int { return int(q.count.Load()) }

// Backlog is the number of requests waiting in bucket k.
func (q *Queue) Backlog(k policy.Key) int { return q.ledger.backlog(k) }

// Position is p's place in its bucket, 1 being the next to be released,
// or 0 once it has left.
func (q *Queue) Position(p *Pending) int { return q.ledger.position(p.Req.Key, p.seq) }

// Stat returns a snapshot of bucket k; false when nothing waits in it.
func (q *Queue) Stat(k policy.Key) (BucketStat, bool) { return q.ledger.stat(k) }

// List returns one page of the buckets matching lq, and how many match in
// all (see [ListQuery]).
func (q *Queue) List(lq ListQuery) ([]BucketStat, int) { return q.ledger.list(lq) }

// markSuspended records a suspension of k for the admin view.
func (q *Queue) markSuspended(k policy.Key, until time.Time) { q.ledger.suspended(k, until) }

// Wake ends the suspension of bucket k's LiteTopic now, on a backend that
// can ([Waker]); it reports whether it did.
func (q *Queue) Wake(k policy.Key) bool {
	w, ok := q.backend.(Waker)
	return ok && w.Wake(q.LiteTopic(k))
}

// Pauses reports whether the backend honours [SuccessThenPause].
func (q *Queue) Pauses() bool {
	_, ok := q.backend.(Pauser)
	return ok
}

// Wakeable reports whether the backend can end a suspension early.
func (q *Queue) Wakeable() bool {
	_, ok := q.backend.(Waker)
	return ok
}

// WakeSuspended wakes every suspended bucket that c touches, so that a
// rate increase reaches requests already queued at once: they are
// delivered again and the consumer asks the pacer afresh. A slower rate
// needs no wake: it applies at the bucket's next delivery.
func (q *Queue) WakeSuspended(c policy.Change) {
	if !q.Wakeable() {
		return
	}
	lq := ListQuery{State: StateSuspended, Tenant: c.Tenant, Model: c.Model, Exact: true, Limit: math.MaxInt}
	if c.Key != (policy.Key{}) {
		lq.Tenant, lq.Model = c.Key.Tenant, c.Key.Model
	}
	items, _ := q.List(lq)
	for _, it := range items {
		if c.Matches(it.Key) {
			q.Wake(it.Key)
		}
	}
}

// Close closes the backend (see [Backend.Close]).
func (q *Queue) Close(ctx context.Context) (Leftover, error) { return q.backend.Close(ctx) }

// Ready reports whether the backend can take and deliver messages.
func (q *Queue) Ready(ctx context.Context) error { return q.backend.Ready(ctx) }

// IsFull reports whether err says a queue is full.
func IsFull(err error) (*FullError, bool) {
	var full *FullError
	ok := errors.As(err, &full)
	return full, ok
}
