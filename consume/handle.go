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
	p, found := c.q.lookup(d.ID)
	if !found { // its handler is gone, or it is from an earlier process
		return c.drop(d.Key, ReasonClientGone)
	}
	k := p.Req.Key
	// A panic here is a bug in this package or a Pacer/Upstreams: answer
	// the client and drop the message rather than let a backend retry it.
	defer func() {
		if v := recover(); v != nil {
			c.panicked(k, d.ID, v)
			if p.Abandon() {
				p.Send(Event{Kind: EventError, Err: fmt.Errorf("consume: handler panicked: %v", v)})
			}
			c.q.depart(p) // trims k's grants (Queue.onLeave)
			res = Success()
		}
	}()
	for try := 0; ; try++ {
		switch {
		case p.Dispatched(): // a redelivery after a lost ack
			return c.drop(k, ReasonDuplicate)
		case p.gone():
			c.q.depart(p) // trims k's grants (Queue.onLeave)
			return c.drop(k, ReasonClientGone)
		}
		// One reading of the clock serves every decision from here to the
		// dispatch, a few microseconds: a reading costs 50 ns on a VM, and
		// there were six to eight.
		now := time.Now()
		// Pace first, taking nothing: a slot of the pool is held for a
		// bucket that may not release yet only for as long as a grant is
		// worth holding.
		if wait := c.cfg.Pacer.WaitAt(now, k, 1); wait > 0 {
			if wait > maxGrantPace {
				c.cap.forfeit(k)
			}
			if wait >= c.minSuspend || try > 0 {
				return c.suspend(k, max(wait, c.minSuspend), ReasonPace)
			}
			// Below the backend's Suspend precision: wait here, then ask again.
			if !sleep(ctx, p.Ctx, wait) {
				return Suspend(wait) // the backend is closing; the message stays
			}
			continue
		}
		slot, ok, recheck := c.cap.acquire(k, p.Req.Band, p.Req.Weight, now)
		if !ok {
			return c.suspendForCapacity(k, recheck)
		}
		if wait := c.cfg.Pacer.AcquireOrSuspendAt(now, k, 1); wait > 0 { // the rate fell meanwhile
			c.cap.unhold(k, slot)
			return c.suspend(k, max(wait, c.minSuspend), ReasonPace)
		}
		return c.dispatch(p, slot, d.Inline, now)
	}
}

func (c *Consumer) suspendForCapacity(k policy.Key, recheck bool) Result {
	reason := ReasonCapacity
	if recheck {
		reason = ReasonCapacityRecheck
	}
	if c.cfg.Capacity == CapacityPoll {
		return c.suspend(k, c.cfg.CapacityBackoff, reason)
	}
	return c.suspend(k, c.cap.wait, reason)
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

// dispatch hands the request to an invocation goroutine (or, delivered
// inline, to the goroutine submitting it) and acknowledges the message at
// once (see the package doc: ack at dispatch). now is when the slot was
// taken.
func (c *Consumer) dispatch(p *Pending, slot Slot, inline bool, now time.Time) Result {
	k := p.Req.Key
	if !p.claim(now) { // abandoned by its handler a moment ago
		c.cap.unhold(k, slot)
		c.q.depart(p)
		return c.drop(k, ReasonClientGone)
	}
	emptied := c.q.release(p, now)
	c.obs.Released(k, now.Sub(p.Req.Submitted))
	inv := &p.inv
	*inv = invocation{c: c, p: p, slot: slot}
	inv.m.start(c.cfg.Fairness, k, c.cfg.CompletionWeight, p.Req, emptied, now)
	if !c.goInvoke(inv, inline) {
		slot.Release()
		inv.m.end()
		c.ended(k)
		p.Send(Event{Kind: EventError, Err: ErrConsumerClosed})
	}
	return c.paceNext(k, now, emptied)
}

// paceNext is a release's result. While requests wait in k's bucket, it
// pauses the bucket's LiteTopic until its next slot (on a backend that
// can): the next request is not delivered only to be suspended. The
// pause is a suspension like any other (recorded, woken by a rate
// increase), and forfeits the bucket's grant when it is long, as the
// next delivery's would (see Handle).
func (c *Consumer) paceNext(k policy.Key, now time.Time, emptied bool) Result {
	if emptied || !c.pauses {
		return Success()
	}
	wait := c.cfg.Pacer.WaitAt(now, k, 1)
	if wait < c.minSuspend {
		return Success() // the next delivery makes a short wait up itself
	}
	if wait > maxGrantPace {
		c.cap.forfeit(k)
	}
	return SuccessThenPause(c.paused(k, wait, ReasonPace))
}

// ended records that one request of k left the pool. In fair mode, the
// room the gate keeps for buckets below their share depends on how many
// requests run, which counts this end only now (the slot was released
// first): a slot it refused a moment ago may be grantable.
func (c *Consumer) ended(k policy.Key) {
	c.cfg.Fairness.Done(k, time.Now())
	if c.cap.guard {
		c.cap.grantModel(k.Model)
	}
}

func (c *Consumer) panicked(k policy.Key, id string, v any) {
	c.obs.Panicked(k)
	c.cfg.Logger.Error("consume: panic", "id", id, "bucket", k.String(), "panic", v, "stack", string(debug.Stack()))
}
