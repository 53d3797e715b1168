package embedded

import (
	"time"

	"github.com/pacegate/pacegate/consume"
)

// entry is one queued message. The Delivery is built once at Publish and
// handed to the handler by pointer, so a delivery allocates nothing.
type entry struct {
	d    consume.Delivery
	next *entry
}

// Topic states. A topic is in exactly one place: the idle list (empty),
// the ready queue, a worker (in flight) or the timer heap (suspended).
const (
	stIdle uint8 = iota
	stReady
	stInflight
	stSuspended
)

// topic is one LiteTopic. All fields are guarded by Engine.mu. It is kept
// small (80 bytes) because a million idle ones may exist.
type topic struct {
	name       string
	head, tail *entry // FIFO; the head stays queued while in flight
	prev, next *topic // ready queue (next only) or idle list (both)
	// due is the resume time (unix ns) while suspended and the time it
	// became empty while idle.
	due   int64
	hidx  int32 // index in the timer heap while suspended
	state uint8
	// woken is set by Wake while the topic is in flight: the suspension
	// its handler is about to ask for must end at once.
	woken bool
}

// spareEntries keeps acknowledged entries for the next messages, last
// freed first: a publish then allocates nothing of the engine's own, on
// the queue's hop (a fresh allocation there is one that, now and then,
// refills its span from the heap, the hop's slowest step). At most
// maxSpareEntries are kept, enough for the messages acknowledged between
// two publishes on a busy engine. Guarded by Engine.mu.
type spareEntries struct{ free []*entry }

const maxSpareEntries = 256

// get returns an entry for m's first delivery.
func (s *spareEntries) get(m *consume.Message) *entry {
	n := len(s.free)
	if n == 0 {
		return &entry{d: consume.Delivery{Message: *m, Attempt: 1}}
	}
	en := s.free[n-1]
	s.free = s.free[:n-1]
	en.d = consume.Delivery{Message: *m, Attempt: 1}
	return en
}

// put keeps en, acknowledged and unlinked, unless enough are kept. Its
// message goes, so that a kept entry holds no body.
func (s *spareEntries) put(en *entry) {
	if len(s.free) < maxSpareEntries {
		en.d = consume.Delivery{}
		s.free = append(s.free, en)
	}
}

func (t *topic) empty() bool { return t.head == nil }

func (t *topic) push(e *entry) {
	if t.tail == nil {
		t.head = e
	} else {
		t.tail.next = e
	}
	t.tail = e
}

// pop unlinks the head entry.
func (t *topic) pop() *entry {
	e := t.head
	t.head = e.next
	if t.head == nil {
		t.tail = nil
	}
	e.next = nil
	return e
}

// observe adds a departure at now (unix ns); emptied says the queue is
// now empty.
func (d *drainRate) observe(now int64, emptied bool) {
	if d.last != 0 {
		g := now - d.last
		if d.gap == 0 {
			d.gap = g
		} else {
			d.gap += (g - d.gap) / 8
		}
	}
	d.last = now
	if emptied {
		d.last = 0 // the next gap would include idle time, not service time
	}
}

// drainRate is an EWMA of the time between two departures.
type drainRate struct{ last, gap int64 }

// estimate is how long until the next departure is likely, or fallback
// when nothing has been measured.
func (d drainRate) estimate(fallback time.Duration) time.Duration {
	if d.gap <= 0 || time.Duration(d.gap) > time.Minute {
		return fallback
	}
	return max(time.Duration(d.gap), time.Millisecond)
}

// topicQueue is a FIFO of topics linked through topic.next: the ready
// queue. Pushing to the back after each delivery makes it round-robin.
type topicQueue struct {
	head, tail *topic
	n          int
}

func (q *topicQueue) push(t *topic) {
	t.next = nil
	if q.tail == nil {
		q.head = t
	} else {
		q.tail.next = t
	}
	q.tail = t
	q.n++
}

func (q *topicQueue) pop() *topic {
	t := q.head
	q.head = t.next
	if q.head == nil {
		q.tail = nil
	}
	t.next = nil
	q.n--
	return t
}

// idleList holds empty topics in the order they became empty, so the
// oldest is at the head and reclaiming expired ones is O(1) each.
type idleList struct{ head, tail *topic }

func (l *idleList) push(t *topic) {
	t.prev, t.next = l.tail, nil
	if l.tail == nil {
		l.head = t
	} else {
		l.tail.next = t
	}
	l.tail = t
}

func (l *idleList) remove(t *topic) {
	if t.prev == nil {
		l.head = t.next
	} else {
		t.prev.next = t.next
	}
	if t.next == nil {
		l.tail = t.prev
	} else {
		t.next.prev = t.prev
	}
	t.prev, t.next = nil, nil
}
