package consume

import "fmt"

// invocation is one dispatched request's upstream call: the slot it holds
// and the meter of its fair share, kept together in the request's Pending
// so that the request's path allocates them with it (as closures and a
// meter of their own, they were four allocations per request).
type invocation struct {
	c    *Consumer
	slot Slot
	m    meter    // ends with what a chunk touches
	p    *Pending // after it: a chunk's next stop
}

// run makes the call, tracked for Close (see Consumer.goInvoke).
func (inv *invocation) run() {
	defer inv.c.invoked()
	inv.call()
}

// call performs the upstream call and ends the response with EventDone
// or EventError. Every Send returns once the client is gone, so this never
// blocks forever; cancelling p.Ctx aborts the call. The response is
// metered into the bucket's fair share as it streams.
func (inv *invocation) call() {
	c, p, slot, m := inv.c, inv.p, inv.slot, &inv.m
	k := p.Req.Key
	defer c.ended(k)
	defer m.end()
	defer func() {
		if v := recover(); v != nil {
			slot.Release() // a no-op if Do already released it
			c.panicked(k, p.Req.ID, v)
			p.Send(Event{Kind: EventError, Err: fmt.Errorf("consume: upstream call panicked: %v", v)})
		}
	}()
	err := slot.Do(p.Ctx, p.Req, inv)
	if u := m.tally.Usage; m.tally.Known && u.Cached {
		if r, ok := slot.(CacheReporter); ok {
			r.Cached(p.Req, u.PromptTokens, u.CachedTokens)
		}
	}
	if err != nil {
		p.Send(Event{Kind: EventError, Err: err})
		return
	}
	p.Send(Event{Kind: EventDone})
}

// Emit is where the call streams its events: the meter, then the client.
func (inv *invocation) Emit(ev Event) error {
	inv.m.observe(ev)
	return inv.p.Send(ev)
}
