package upstream

import "time"

// Bounds of the silence after which a conversation no longer counts as
// live on its replica (liveConversations.window).
const (
	liveGapFactor = 4 // times the mean gap between a conversation's turns
	minLiveWindow = time.Second
	maxLiveWindow = time.Minute
)

// liveConversations counts, per upstream, the conversations it holds
// that are still going: those whose last turn was routed there within
// the window. A conversation is known by the hash of its prompt's first
// block, which every one of its turns shares. A new conversation is
// placed where the fewest are live: a replica's cache holds a number of
// them, and one more than it holds evicts the one paused the longest,
// whose next turn then prefills its whole prompt again (the load a
// replica ran over the last second is a noisier count of the same).
// Among those, it goes where its tenant has a conversation: a client
// that ends one and starts the next takes the place it left, which
// counts as live until the window passes.
//
// The window is liveGapFactor times the mean gap between consecutive
// turns of a conversation, as seen by the whole pool: a conversation
// silent for that long has most probably ended. Its fields are guarded
// by Pool.mu.
type liveConversations struct {
	gap float64 // mean gap between turns, ns; 0 until one is seen
}

// liveSet is one upstream's conversations. The zero value is empty.
type liveSet struct {
	last map[uint64]int64 // conversation → loadClock of its last turn here
	// order is the turns in the order they were routed here, for
	// expiry; a turn whose conversation came back later is skipped.
	order []liveTurn
	// tenants counts the conversations in last by tenant.
	tenants map[string]int
}

type liveTurn struct {
	conv   uint64
	at     int64
	tenant string
}

// window is how long a conversation stays live after its last turn.
func (c *liveConversations) window() int64 {
	if c.gap == 0 {
		return int64(maxLiveWindow)
	}
	return min(max(int64(c.gap*liveGapFactor), int64(minLiveWindow)), int64(maxLiveWindow))
}

// touch records a turn of conversation conv routed to s at now (a
// loadClock), and learns the gap since its last turn there.
func (c *liveConversations) touch(s *liveSet, conv uint64, tenant string, now int64) {
	if s.last == nil {
		s.last, s.tenants = map[uint64]int64{}, map[string]int{}
	}
	prev, ok := s.last[conv]
	if !ok {
		s.tenants[tenant]++
	}
	if ok && now > prev {
		g := float64(now - prev)
		if c.gap == 0 {
			c.gap = g
		} else {
			c.gap += meanWeightGap * (g - c.gap)
		}
	}
	s.last[conv] = now
	s.order = append(s.order, liveTurn{conv, now, tenant})
	c.expire(s, now)
}

// meanWeightGap is how much one gap moves the mean gap.
const meanWeightGap = 0.05

// count is how many conversations are live on s at now.
func (c *liveConversations) count(s *liveSet, now int64) int {
	c.expire(s, now)
	return len(s.last)
}

// expire forgets s's conversations silent for the window at now.
func (c *liveConversations) expire(s *liveSet, now int64) {
	cutoff := now - c.window()
	i := 0
	for ; i < len(s.order) && s.order[i].at < cutoff; i++ {
		if t := s.order[i]; s.last[t.conv] == t.at {
			delete(s.last, t.conv)
			if s.tenants[t.tenant]--; s.tenants[t.tenant] == 0 {
				delete(s.tenants, t.tenant)
			}
		}
	}
	s.order = s.order[i:] // append reallocates what is left when it grows
}

// holds reports whether s holds a live conversation of tenant. Requires
// s expired to now (count).
func (s *liveSet) holds(tenant string) bool { return s.tenants[tenant] > 0 }

// clear forgets every conversation of s: its upstream went down, and
// they re-home.
func (s *liveSet) clear() { s.last, s.order, s.tenants = nil, nil, nil }

// conversation is the key of req's conversation: the hash of its
// prompt's first block; ok is false for a prompt shorter than a block.
func conversation(prefix []uint64) (uint64, bool) {
	if len(prefix) == 0 {
		return 0, false
	}
	return prefix[0], true
}
