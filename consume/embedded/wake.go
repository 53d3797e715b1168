package embedded

import "time"

// Wake ends a LiteTopic's suspension now: its head is delivered again as
// soon as a worker is free, and the handler decides afresh (typically
// with a new, shorter pacing wait after a rate increase). It reports
// whether the topic was suspended. Waking never reorders a topic's
// messages. Wake implements [consume.Waker].
func (e *Engine) Wake(liteTopic string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.topics[liteTopic]
	if !ok || t.state != stSuspended || e.closed {
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
