package embedded

// timerHeap is a min-heap of suspended topics ordered by due. Hand-written
// rather than container/heap to avoid boxing each topic in an interface.
// Each topic keeps its index (hidx) so that Wake can take it out early.
type timerHeap []*topic

func (h *timerHeap) push(t *topic) {
	t.hidx = int32(len(*h))
	*h = append(*h, t)
	h.up(len(*h) - 1)
}

// popMin removes and returns the topic due first.
func (h *timerHeap) popMin() *topic { return h.remove(0) }

// remove takes out the topic at index i and returns it.
func (h *timerHeap) remove(i int) *topic {
	old := *h
	t := old[i]
	last := len(old) - 1
	if i != last {
		h.swap(i, last)
	}
	old[last] = nil
	*h = old[:last]
	if i < last {
		h.down(i)
		h.up(i)
	}
	return t
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].due <= h[i].due {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].due < h[l].due {
			m = r
		}
		if h[i].due <= h[m].due {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = int32(i)
	h[j].hidx = int32(j)
}
