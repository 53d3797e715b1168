package fairshare

// flowHeap is a min-heap of waiting flows by (counter, seq). Each flow
// keeps its index, so that a charge or a departure can fix or remove it in
// O(log n). Written out rather than container/heap so that nothing is
// boxed in an interface.
type flowHeap []*flow

func (h *flowHeap) push(f *flow) {
	f.hidx = len(*h)
	*h = append(*h, f)
	h.up(f.hidx)
}

func (h *flowHeap) remove(i int) {
	old := *h
	last := len(old) - 1
	f := old[i]
	if i != last {
		h.swap(i, last)
	}
	old[last] = nil
	*h = old[:last]
	if i < last {
		h.fix(i)
	}
	f.hidx = -1
}

// fix restores the order after the key at i changed.
func (h flowHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h flowHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down reports whether the flow at i moved.
func (h flowHeap) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i != start
}

func (h flowHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}
