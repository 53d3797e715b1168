package upstream

import (
	"time"

	"github.com/pacegate/pacegate/policy"
)

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
// Among those, it goes where its tenant has a conversation with the same
// model: a client that ends one and starts the next takes the place it
// left. The one it left stops counting then if it was the tenant's only
// one with the model (retireLone); otherwise it counts as live until the
// window passes.
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
	// owners counts the conversations in last by their tenant and model;
	// latest is the conversation of each last seen here (see retireLone).
	owners map[policy.Key]int
	latest map[policy.Key]uint64
}

type liveTurn struct {
	conv  uint64
	at    int64
	owner policy.Key
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
func (c *liveConversations) touch(s *liveSet, conv uint64, owner policy.Key, now int64) {
	if s.last == nil {
		s.last, s.owners, s.latest = map[uint64]int64{}, map[policy.Key]int{}, map[policy.Key]uint64{}
	}
	prev, ok := s.last[conv]
	if !ok {
		s.owners[owner]++
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
	s.latest[owner] = conv
	s.order = append(s.order, liveTurn{conv, now, owner})
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
			s.drop(t.owner)
		}
	}
	s.order = s.order[i:] // append reallocates what is left when it grows
}

// drop takes one conversation of owner off s's count; its last turn has
// been deleted from s.last.
func (s *liveSet) drop(owner policy.Key) {
	if s.owners[owner]--; s.owners[owner] == 0 {
		delete(s.owners, owner)
		delete(s.latest, owner)
	}
}

// retireLone ends the live conversation of owner (a tenant with a model)
// that is starting a new one (a miss) at now, when it is owner's only one
// in the pool (ups): a client that holds one conversation at a time has
// ended it, and the new one takes its place instead of counting beside
// it until the window passes. Otherwise every replica would count a few
// conversations that have ended as live, a different few on each, and
// the count that places new conversations would be that noise (12 to 15
// "live" per replica where 8 were going, in the prefix benchmark). An
// owner that does run two at once has its other one back on its next
// turn. Requires Pool.mu held.
func (c *liveConversations) retireLone(ups []*upstream, owner policy.Key, now int64) {
	var home *liveSet
	for _, u := range ups {
		s := &u.conv
		c.expire(s, now)
		switch n := s.owners[owner]; {
		case n > 1 || n == 1 && home != nil:
			return // several: nothing tells which, if any, has ended
		case n == 1:
			home = s
		}
	}
	if home == nil {
		return
	}
	conv, ok := home.latest[owner]
	if _, live := home.last[conv]; !ok || !live {
		return
	}
	delete(home.last, conv)
	home.drop(owner)
}

// holds reports whether s holds a live conversation of owner. Requires s
// expired to now (count).
func (s *liveSet) holds(owner policy.Key) bool { return s.owners[owner] > 0 }

// clear forgets every conversation of s: its upstream went down, and
// they re-home.
func (s *liveSet) clear() { s.last, s.order, s.owners, s.latest = nil, nil, nil, nil }

// conversation is the key of req's conversation: the hash of its
// prompt's first block; ok is false for a prompt shorter than a block.
func conversation(prefix []uint64) (uint64, bool) {
	if len(prefix) == 0 {
		return 0, false
	}
	return prefix[0], true
}
