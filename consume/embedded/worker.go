package embedded

import (
	"runtime/debug"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// worker delivers messages until Close. It never sleeps on behalf of a
// LiteTopic: a Suspend or Retry result hands the topic to the timer and
// the worker moves on to the next ready topic.
func (e *Engine) worker() {
	defer e.exit()
	for {
		t, en, ok := e.next()
		if !ok {
			return
		}
		res, panicked := e.call(en)
		e.settle(t, en, res, panicked)
	}
}

// next takes the first ready topic, waiting for one; ok is false once the
// engine is closed.
func (e *Engine) next() (t *topic, en *entry, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.ready.head == nil && !e.closed {
		e.cond.Wait()
	}
	if e.closed {
		return nil, nil, false
	}
	t = e.ready.pop()
	t.state = stInflight
	e.busy++
	return t, t.head, true
}

// call runs the handler for one delivery. A panic kills only this message:
// it is logged with its stack, reported through OnPanic and dropped (a
// panic is a bug; redelivering would most likely panic again and block the
// LiteTopic behind a poison message).
func (e *Engine) call(en *entry) (res consume.Result, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			e.cfg.Logger.Error("embedded: handler panicked; message dropped",
				"id", en.d.ID, "litetopic", en.d.LiteTopic, "attempt", en.d.Attempt,
				"panic", v, "stack", string(debug.Stack()))
			if e.cfg.OnPanic != nil {
				e.cfg.OnPanic(&en.d, v)
			}
		}
	}()
	return e.handler(e.ctx, &en.d), false
}

// settle applies a handler's result to the topic it was delivered from.
func (e *Engine) settle(t *topic, en *entry, res consume.Result, panicked bool) {
	now := time.Now().UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.busy--
	woken := t.woken
	t.woken = false
	switch {
	case panicked, res.Action == consume.ActionSuccess && woken: // woken while in flight: no pause
		e.remove(t, now, 0)
	case res.Action == consume.ActionSuccess:
		e.remove(t, now, res.Delay)
	case res.Action == consume.ActionSuspend && woken:
		e.makeReady(t) // woken while in flight: the suspension is over already
	case res.Action == consume.ActionSuspend:
		e.suspend(t, now, res.Delay)
	case en.d.Attempt >= e.cfg.MaxAttempts:
		e.cfg.Logger.Warn("embedded: message dropped after max attempts",
			"id", en.d.ID, "litetopic", t.name, "attempts", en.d.Attempt)
		e.remove(t, now, 0)
	default: // ActionRetry, and any unknown action, which is safest retried
		en.d.Attempt++
		e.suspend(t, now, e.cfg.RetryBackoff(en.d.Attempt))
	}
}

// remove acknowledges t's head; a topic with more messages is paused
// for pause first (see [consume.SuccessThenPause]). Requires mu held.
func (e *Engine) remove(t *topic, now int64, pause time.Duration) {
	en := t.pop()
	e.msgs--
	e.bytes -= int64(len(en.d.Body))
	e.spare.put(en)
	e.rate.observe(now, e.msgs == 0)
	if !t.empty() {
		e.suspend(t, now, pause) // at once (pause 0): to the back, round-robin across ready topics
		return
	}
	t.state = stIdle
	t.due = now
	e.idle.push(t)
}

// suspend hands t to the timer goroutine until now+d. Requires mu held.
func (e *Engine) suspend(t *topic, now int64, d time.Duration) {
	if d <= 0 {
		e.makeReady(t)
		return
	}
	t.state = stSuspended
	t.due = now + int64(d)
	e.timers.push(t)
	if e.timers[0] == t {
		select { // the timer goroutine must re-arm for an earlier time
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// timerLoop moves suspended topics back to the ready queue when due. It is
// the only goroutine that waits on behalf of suspended topics.
func (e *Engine) timerLoop() {
	defer e.exit()
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for {
		if next, ok := e.releaseDue(time.Now().UnixNano()); ok {
			tm.Reset(next)
		} else {
			tm.Stop()
		}
		select {
		case <-e.quit:
			return
		case <-e.wake:
		case <-tm.C:
		}
	}
}

// releaseDue makes every topic due by now ready and returns how long until
// the next one is due (ok false when none is suspended).
func (e *Engine) releaseDue(now int64) (next time.Duration, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.timers) > 0 && e.timers[0].due <= now {
		e.makeReady(e.timers.popMin())
	}
	if len(e.timers) == 0 {
		return 0, false
	}
	return time.Duration(e.timers[0].due - now), true
}
