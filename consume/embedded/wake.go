package embedded

import "time"

// Wake ends a LiteTopic's suspension now: its head is delivered again as
// soon as a worker is free, and the handler decides afresh (with a new,
// shorter pacing wait after a rate increase, or to take a slot of the
// pool granted to it). A topic whose message is being handled right now
// is marked instead, so that a Suspend its handler returns ends at once:
// a wake can never fall between a handler's decision and its suspension.
// It reports whether the topic was suspended or in flight. Waking never
// reorders a topic's messages. Wake implements [consume.Waker].
func (e *Engine) Wake(liteTopic string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.topics[liteTopic]
	if !ok || e.closed {
		return false
	}
	if t.state == stInflight {
		t.woken = true
		return true
	}
	if t.state != stSuspended {
		return false
	}
	wasFirst := t.hidx == 0
	e.timers.remove(int(t.hidx))
	t.due = time.Now().UnixNano()
	e.makeReady(t)
	if wasFirst {
		select { // the timer goroutine may re-arm for a later time
		case e.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// PausesAfterSuccess implements [consume.Pauser]: a Success with a pause
// hands a LiteTopic that has more messages to the timer, as a Suspend
// does (see remove).
func (*Engine) PausesAfterSuccess() {}
