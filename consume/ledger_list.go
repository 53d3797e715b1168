package consume

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Sort orders for ListQuery.Sort.
const (
	SortBacklog = "backlog" // backlog descending, then key (the default)
	SortKey     = "key"     // tenant, then model, ascending
)

// ListQuery selects and pages buckets for [Queue.List]. The zero value
// lists every bucket, largest backlog first, 100 per page.
type ListQuery struct {
	Tenant, Model string // filters: substring, or the whole name with Exact
	Exact         bool
	State         string // StateIdle, StateQueued, StateSuspended or "" for any
	NonEmpty      bool   // only buckets with a backlog
	Sort          string // SortBacklog ("") or SortKey
	Offset        int
	Limit         int // page size; zero means 100
}

func (q ListQuery) match(k policy.Key, backlog int, state string) bool {
	if q.NonEmpty && backlog == 0 || q.State != "" && q.State != state {
		return false
	}
	return q.matchName(k.Tenant, q.Tenant) && q.matchName(k.Model, q.Model)
}

func (q ListQuery) matchName(name, want string) bool {
	if want == "" {
		return true
	}
	if q.Exact {
		return name == want
	}
	return strings.Contains(name, want)
}

// candidate is the little List needs to filter and order a bucket; the
// full BucketStat is built only for the page returned.
type candidate struct {
	key     policy.Key
	backlog int
}

// List returns one page of the buckets matching q, and how many match in
// all. It scans every shard (one lock at a time) but sorts only the page
// (see page), so it stays in the low milliseconds with 100,000 buckets.
// The page is a snapshot: buckets may change between shards.
func (l *ledger) list(q ListQuery) (items []BucketStat, total int) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	q.Offset = max(q.Offset, 0)
	cands := l.candidates(q)
	less := byBacklog
	if q.Sort == SortKey {
		less = byKey
	}
	for _, c := range page(cands, q.Offset, q.Offset+q.Limit, less) {
		if st, ok := l.stat(c.key); ok {
			items = append(items, st)
		}
	}
	return items, len(cands)
}

func (l *ledger) candidates(q ListQuery) []candidate {
	now := time.Now().UnixNano()
	n := 0
	for i := range l.shards { // size the slice once: 100,000 appends would regrow it
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	out := make([]candidate, 0, n)
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, bq := range s.m {
			if q.match(k, len(bq.waiting), bq.state(now)) {
				out = append(out, candidate{k, len(bq.waiting)})
			}
		}
		s.mu.Unlock()
	}
	return out
}

func byKey(a, b candidate) int {
	return cmp.Or(strings.Compare(a.key.Tenant, b.key.Tenant), strings.Compare(a.key.Model, b.key.Model))
}

// byBacklog breaks ties by key, so pages are stable. With thousands of
// equal backlogs those string comparisons (a cache miss each) are most of
// List's cost.
func byBacklog(a, b candidate) int {
	return cmp.Or(cmp.Compare(b.backlog, a.backlog), byKey(a, b))
}

// heapPage is the largest hi for which page keeps a bounded heap.
const heapPage = 4096

// page returns xs[lo:hi] as if xs were sorted by cmpf, sorting only the
// page. Shallow pages keep a bounded max-heap of hi items: about one
// comparison per item. Deep ones use two quickselects: O(len(xs)) on
// average. cmpf must be a total order (keys are unique), so partitions
// never degenerate on ties.
func page(xs []candidate, lo, hi int, cmpf func(a, b candidate) int) []candidate {
	hi = min(hi, len(xs))
	if lo >= hi {
		return nil
	}
	if hi <= heapPage {
		return smallest(xs, hi, cmpf)[lo:]
	}
	nth(xs, lo, cmpf) // xs[:lo] ≤ xs[lo] ≤ xs[lo+1:]
	rest := xs[lo:]
	nth(rest, hi-lo-1, cmpf) // rest[:hi-lo] is the page, unordered
	p := rest[:hi-lo]
	slices.SortFunc(p, cmpf)
	return p
}

// nth reorders xs so that xs[k] is the element of rank k, smaller ones
// before it and larger ones after (quickselect, median-of-three pivot).
func nth(xs []candidate, k int, cmpf func(a, b candidate) int) {
	for len(xs) > 16 {
		m := len(xs) / 2
		last := len(xs) - 1
		// Order xs[0], xs[m], xs[last]; the median becomes the pivot at last.
		if cmpf(xs[m], xs[0]) < 0 {
			xs[m], xs[0] = xs[0], xs[m]
		}
		if cmpf(xs[last], xs[0]) < 0 {
			xs[last], xs[0] = xs[0], xs[last]
		}
		if cmpf(xs[m], xs[last]) < 0 {
			xs[m], xs[last] = xs[last], xs[m]
		}
		p := 0
		for i := range last {
			if cmpf(xs[i], xs[last]) < 0 {
				xs[i], xs[p] = xs[p], xs[i]
				p++
			}
		}
		xs[p], xs[last] = xs[last], xs[p]
		switch {
		case k == p:
			return
		case k < p:
			xs = xs[:p]
		default:
			xs, k = xs[p+1:], k-p-1
		}
	}
	slices.SortFunc(xs, cmpf)
}

// smallest returns the n smallest of xs by cmpf, sorted, keeping a
// max-heap whose root is the worst item kept so far.
func smallest(xs []candidate, n int, cmpf func(a, b candidate) int) []candidate {
	h := make([]candidate, 0, n)
	for _, x := range xs {
		switch {
		case len(h) < n:
			h = append(h, x)
			siftUp(h, len(h)-1, cmpf)
		case cmpf(x, h[0]) < 0:
			h[0] = x
			siftDown(h, 0, cmpf)
		}
	}
	slices.SortFunc(h, cmpf)
	return h
}

func siftUp(h []candidate, i int, cmpf func(a, b candidate) int) {
	for i > 0 {
		p := (i - 1) / 2
		if cmpf(h[p], h[i]) >= 0 {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func siftDown(h []candidate, i int, cmpf func(a, b candidate) int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && cmpf(h[r], h[l]) > 0 {
			m = r
		}
		if cmpf(h[i], h[m]) >= 0 {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
