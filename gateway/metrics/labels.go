package metrics

import "sync"

// OtherLabel is the label value that tenants and models beyond the cap
// fold into.
const OtherLabel = "_other"

// labelSet admits the first max distinct values of one label and folds
// the rest into [OtherLabel]: a Prometheus series per value lives for the
// process's lifetime, so an unbounded label would grow memory and scrape
// size without end. Safe for concurrent use; the fast path (a value
// already admitted) takes only the read lock.
type labelSet struct {
	max int

	mu   sync.RWMutex
	seen map[string]struct{}
}

func newLabelSet(max int) *labelSet {
	return &labelSet{max: max, seen: make(map[string]struct{}, max)}
}

// value returns v if it is, or can still be, admitted, else OtherLabel.
func (s *labelSet) value(v string) string {
	s.mu.RLock()
	_, ok := s.seen[v]
	full := len(s.seen) >= s.max
	s.mu.RUnlock()
	switch {
	case ok:
		return v
	case full:
		return OtherLabel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return OtherLabel
	}
	s.seen[v] = struct{}{}
	return v
}
