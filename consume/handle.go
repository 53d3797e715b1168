package consume

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Handle implements [Handler]; pass it to Backend.Start. It returns
// promptly: the upstream call runs in an invocation goroutine, and a wait
// is expressed as Suspend (only a wait shorter than the backend's
// MinSuspend is made up here, with a timer). See the package doc for the
// order of the checks.
func (c *Consumer) Handle(ctx context.Context, d *Delivery) (res Result) {
	p, found := c.cfg.Registry.Load(d.ID)
	x, err := parseDelivery(d)
	if err != nil {
		c.cfg.Logger.Warn("consume: bad message dropped", "id", d.ID, "err", err)
		c.depart(x)
		if found {
			p.Send(Event{Kind: EventError, Err: err}) // not dispatched: its buffer is empty
		}
		return c.drop(x, ReasonBadMessage)
	}
	// A panic here is a bug in this package or a Pacer/Upstreams: answer
	// the client and drop the message rather than let a backend retry it.
	defer func() {
		if v := recover(); v != nil {
			c.panicked(x.key, d.ID, v)
			if found && !p.Dispatched() {
				p.Send(Event{Kind: EventError, Err: fmt.Errorf("consume: handler panicked: %v", v)})
			}
			res = Success()
		}
	}()
	for try := 0; ; try++ {
		if !found || p.Ctx.Err() != nil {
			c.depart(x)
			return c.drop(x, ReasonClientGone)
		}
		if p.Dispatched() { // a redelivery after a lost ack
			return c.drop(x, ReasonDuplicate)
		}
		// Capacity first: a pacer slot is never spent on a request that
		// could not be dispatched anyway.
		slot, ok := c.cfg.Upstreams.TryAcquire(x.key.Model)
		if !ok {
			return c.suspend(x, c.cfg.CapacityBackoff, ReasonCapacity)
		}
		wait := c.cfg.Pacer.AcquireOrSuspend(x.key, x.cost)
		if wait <= 0 {
			return c.dispatch(x, d, p, slot)
		}
		slot.Release()
		if wait >= c.minSuspend || try > 0 {
			return c.suspend(x, max(wait, c.minSuspend), ReasonPace)
		}
		// Below the backend's Suspend precision: wait here, then ask again.
		if !sleep(ctx, p.Ctx, wait) {
			return Suspend(wait) // the backend is closing; the message stays
		}
	}
}

// sleep waits d unless ctx or the client's context ends first; it reports
// false only when ctx ended.
func sleep(ctx, client context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-client.Done(): // the next check drops the message
	case <-ctx.Done():
		return false
	}
	return true
}

// dispatch hands the request to an invocation goroutine and acknowledges
// the message at once (see the package doc: ack at dispatch).
func (c *Consumer) dispatch(x delivery, d *Delivery, p *Pending, slot Slot) Result {
	now := time.Now()
	if !p.MarkDispatched(now) {
		slot.Release()
		return c.drop(x, ReasonDuplicate)
	}
	if c.cfg.Buckets != nil {
		c.cfg.Buckets.MarkReleased(x.key, now) // before the departure, which may delete the bucket
	}
	c.depart(x)
	var queued time.Duration
	if !x.enqueued.IsZero() {
		queued = now.Sub(x.enqueued)
	}
	c.obs.Released(x.key, queued)
	req := &UpstreamRequest{
		ID: d.ID, Tenant: x.key.Tenant, Model: x.key.Model, Path: d.Properties[PropPath],
		Body: d.Body, Stream: d.Properties[PropStream] == "1",
	}
	if !c.goInvoke(func() { c.invoke(x.key, p, slot, req) }) {
		slot.Release()
		p.Send(Event{Kind: EventError, Err: ErrConsumerClosed})
	}
	return Success()
}

// invoke performs the upstream call and ends the response with EventDone
// or EventError. Every Send returns once the client is gone, so this never
// blocks forever; cancelling p.Ctx aborts the call.
func (c *Consumer) invoke(k policy.Key, p *Pending, slot Slot, req *UpstreamRequest) {
	defer func() {
		if v := recover(); v != nil {
			slot.Release() // a no-op if Do already released it
			c.panicked(k, req.ID, v)
			p.Send(Event{Kind: EventError, Err: fmt.Errorf("consume: upstream call panicked: %v", v)})
		}
	}()
	if err := slot.Do(p.Ctx, req, p.Send); err != nil {
		p.Send(Event{Kind: EventError, Err: err})
		return
	}
	p.Send(Event{Kind: EventDone})
}

func (c *Consumer) panicked(k policy.Key, id string, v any) {
	c.obs.Panicked(k)
	c.cfg.Logger.Error("consume: panic", "id", id, "bucket", k.String(), "panic", v, "stack", string(debug.Stack()))
}
