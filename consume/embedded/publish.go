package embedded

import (
	"context"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// reclaimPerPublish bounds the idle topics one Publish reclaims, so the
// cost of reclaiming is spread over later calls.
const reclaimPerPublish = 2

// Publish implements [consume.Backend.Publish]. It never blocks: a full
// engine fails at once with a *consume.FullError and nothing queued is
// dropped. A bucket's own backlog limit is the consume.Queue's. The engine keeps a shallow copy of *m, so the caller
// may reuse m but must not modify m.Body or m.Properties afterwards.
//
// With Config.InlineDelivery, when m lands in an idle LiteTopic while a
// worker is free and no other LiteTopic is waiting, Publish delivers it
// itself, on the caller's goroutine, before it returns (see takeInline):
// the handler's answer is the same, but waking a worker thread, the
// largest part of an idle bucket's added latency, is saved.
func (e *Engine) Publish(ctx context.Context, m *consume.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := consume.ValidLiteTopic(m.LiteTopic); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	inline, en, err := e.enqueue(m, now)
	if inline != nil {
		e.deliverInline(inline, en)
	}
	return err
}

// enqueue adds m to its LiteTopic. It returns the topic and m's entry
// when the caller is to deliver it itself.
func (e *Engine) enqueue(m *consume.Message, now int64) (*topic, *entry, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, consume.ErrClosed
	}
	e.reclaim(now, reclaimPerPublish)
	t := e.topics[m.LiteTopic]
	if err := e.admit(m); err != nil {
		return nil, nil, err
	}
	if t == nil {
		t = &topic{name: m.LiteTopic}
		e.topics[t.name] = t
	} else if t.state == stIdle {
		e.idle.remove(t)
	}
	en := e.spare.get(m)
	t.push(en)
	e.msgs++
	e.bytes += int64(len(m.Body))
	if t.state != stIdle {
		return nil, nil, nil
	}
	if e.takeInline(t) {
		return t, en, nil
	}
	e.makeReady(t)
	return nil, nil, nil
}

// takeInline claims t, which just became non-empty, for delivery on the
// publisher's goroutine: only while a worker is idle anyway (so the pool
// bound holds: it counts as a handler call) and no other topic waits for
// one (so it jumps no queue). It counts as a running engine goroutine, so
// Close waits for it. Requires mu held.
func (e *Engine) takeInline(t *topic) bool {
	if !e.cfg.InlineDelivery || !e.started || e.busy >= e.cfg.Workers || e.ready.head != nil {
		return false
	}
	t.state = stInflight
	e.busy++
	e.running++
	return true
}

// deliverInline runs the delivery takeInline claimed.
func (e *Engine) deliverInline(t *topic, en *entry) {
	defer e.exit()
	en.d.Inline = true // only this call: a redelivery comes from a worker
	res, panicked := e.call(en)
	en.d.Inline = false
	e.settle(t, en, res, panicked)
}

// admit checks the engine's memory bounds. Requires mu held.
func (e *Engine) admit(m *consume.Message) error {
	if e.msgs >= e.cfg.MaxMessages {
		return e.engineFull(m, int64(e.cfg.MaxMessages))
	}
	if e.bytes+int64(len(m.Body)) > e.cfg.MaxBytes {
		return e.engineFull(m, e.cfg.MaxBytes)
	}
	return nil
}

func (e *Engine) engineFull(m *consume.Message, limit int64) error {
	return &consume.FullError{Scope: consume.ScopeEngine, LiteTopic: m.LiteTopic, Limit: limit, RetryAfter: e.rate.estimate(time.Second)}
}

// reclaim deletes up to n topics that have been empty for IdleTTL. The
// idle list is ordered by when topics became empty, so only its head needs
// checking. Requires mu held.
func (e *Engine) reclaim(now int64, n int) {
	ttl := int64(e.cfg.IdleTTL)
	for ; n > 0 && e.idle.head != nil && now-e.idle.head.due >= ttl; n-- {
		t := e.idle.head
		e.idle.remove(t)
		delete(e.topics, t.name)
	}
}

// makeReady queues t for a worker. Requires mu held.
func (e *Engine) makeReady(t *topic) {
	t.state = stReady
	e.ready.push(t)
	e.cond.Signal()
}

// EngineStats is a snapshot of an Engine's queues.
type EngineStats struct {
	Topics    int   // LiteTopics known, idle ones not yet reclaimed included
	Ready     int   // LiteTopics waiting for a worker
	Suspended int   // LiteTopics held by the timer (Suspend or Retry backoff)
	InFlight  int   // handler calls in progress
	Messages  int   // messages queued, in flight included
	Bytes     int64 // body bytes queued
}

// Stats returns a snapshot of the engine's queues.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return EngineStats{
		Topics: len(e.topics), Ready: e.ready.n, Suspended: len(e.timers),
		InFlight: e.busy, Messages: e.msgs, Bytes: e.bytes,
	}
}
