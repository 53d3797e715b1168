package prefix

// lru is one replica's blocks, most recently used first: an intrusive
// doubly linked list over a slice, so that a touch allocates nothing
// once the slice has grown. It is not safe for concurrent use.
type lru struct {
	pos        map[uint64]int32 // hash → index in nodes
	nodes      []node
	free       []int32 // unused indexes in nodes
	head, tail int32   // most and least recently used; none = -1
}

type node struct {
	hash       uint64
	prev, next int32
}

const none = -1

func newLRU() lru { return lru{pos: map[uint64]int32{}, head: none, tail: none} }

func (l *lru) len() int { return len(l.pos) }

func (l *lru) has(h uint64) bool { _, ok := l.pos[h]; return ok }

// touch makes h the most recently used block, adding it if it is new.
// It reports whether h was added.
func (l *lru) touch(h uint64) (added bool) {
	if i, ok := l.pos[h]; ok {
		l.unlink(i)
		l.pushFront(i)
		return false
	}
	var i int32
	if n := len(l.free); n > 0 {
		i, l.free = l.free[n-1], l.free[:n-1]
	} else {
		i = int32(len(l.nodes))
		l.nodes = append(l.nodes, node{})
	}
	l.nodes[i].hash = h
	l.pos[h] = i
	l.pushFront(i)
	return true
}

// evict removes the least recently used block and returns it.
func (l *lru) evict() (uint64, bool) {
	if l.tail == none {
		return 0, false
	}
	h := l.nodes[l.tail].hash
	l.remove(h)
	return h, true
}

// remove forgets h; it reports whether h was there.
func (l *lru) remove(h uint64) bool {
	i, ok := l.pos[h]
	if !ok {
		return false
	}
	l.unlink(i)
	delete(l.pos, h)
	l.free = append(l.free, i)
	return true
}

func (l *lru) pushFront(i int32) {
	l.nodes[i].prev, l.nodes[i].next = none, l.head
	if l.head != none {
		l.nodes[l.head].prev = i
	}
	l.head = i
	if l.tail == none {
		l.tail = i
	}
}

func (l *lru) unlink(i int32) {
	n := l.nodes[i]
	if n.prev != none {
		l.nodes[n.prev].next = n.next
	} else {
		l.head = n.next
	}
	if n.next != none {
		l.nodes[n.next].prev = n.prev
	} else {
		l.tail = n.prev
	}
}

// each calls f with every block, most recently used first.
func (l *lru) each(f func(h uint64)) {
	for i := l.head; i != none; i = l.nodes[i].next {
		f(l.nodes[i].hash)
	}
}
